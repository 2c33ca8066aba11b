package main

import "time"

type outcome int

const (
	succeeded outcome = iota
	failed
)

// progress is whether a run finished, how and when (at is nil when it says it finished but
// not when). A running run and an object that is no run at all are both unfinished.
type progress struct {
	finished bool
	outcome  outcome
	at       *time.Time
}

var unfinished = progress{}

func finishedAt(o outcome, at *time.Time) progress {
	return progress{finished: true, outcome: o, at: at}
}

// progressOf is the progress of obj by its kind's finish rule.
func progressOf(rule finishRule, obj object) progress {
	switch rule {
	case succeededCondition:
		// Without a Succeeded condition a BuildRun is running and anything else is no run:
		// unfinished either way.
		return succeededProgress(obj)
	case jobConditions:
		return jobProgress(obj)
	case podPhase:
		return podProgress(obj)
	default:
		return unfinished
	}
}

func timestamp(value any, path string) *time.Time {
	s, ok := text(value, path)
	if !ok {
		return nil
	}
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil
	}
	return &at
}

// condition is the first status condition of the type.
func condition(obj object, conditionType string) (map[string]any, bool) {
	found, _ := field(obj, "status.conditions")
	conditions, _ := found.([]any)
	for _, c := range conditions {
		fields, ok := c.(map[string]any)
		if t, _ := fields["type"].(string); ok && t == conditionType {
			return fields, true
		}
	}
	return nil, false
}

// succeededProgress reads a Knative-style Succeeded condition.
func succeededProgress(obj object) progress {
	c, ok := condition(obj, "Succeeded")
	if !ok {
		return unfinished
	}
	var o outcome
	switch status, _ := c["status"].(string); status {
	case "True":
		o = succeeded
	case "False":
		o = failed
	default:
		return unfinished
	}
	return finishedAt(o, firstOf(timestamp(obj, "status.completionTime"), timestamp(c, "lastTransitionTime")))
}

// jobProgress reads a Job's Complete or Failed condition.
func jobProgress(obj object) progress {
	for _, check := range []struct {
		conditionType string
		outcome       outcome
	}{{"Complete", succeeded}, {"Failed", failed}} {
		c, ok := condition(obj, check.conditionType)
		if status, _ := c["status"].(string); !ok || status != "True" {
			continue
		}
		var at *time.Time
		if check.outcome == succeeded {
			at = timestamp(obj, "status.completionTime")
		}
		return finishedAt(check.outcome, firstOf(at, timestamp(c, "lastTransitionTime")))
	}
	return unfinished
}

// podProgress reads a Pod's phase; it finished when its last container did.
func podProgress(obj object) progress {
	var o outcome
	switch phase, _ := text(obj, "status.phase"); phase {
	case "Succeeded":
		o = succeeded
	case "Failed":
		o = failed
	default:
		return unfinished
	}
	var at *time.Time
	for _, key := range []string{"initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"} {
		found, _ := field(obj, "status."+key)
		statuses, _ := found.([]any)
		for _, status := range statuses {
			if t := timestamp(status, "state.terminated.finishedAt"); t != nil && (at == nil || t.After(*at)) {
				at = t
			}
		}
	}
	return finishedAt(o, at)
}

// latestTime is the latest time the Rust model can represent; later deadlines do not exist.
var latestTime = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)

func add(at time.Time, ttl time.Duration) *time.Time {
	sum := at.Add(ttl)
	if sum.After(latestTime) {
		return nil
	}
	return &sum
}

// expiry computes kube-retention's deadline for obj, when it owns one: the earliest of
// creation + retention.dev/ttl and finish + the TTL for the outcome. now stands in for the
// creation time of an object being created and the finish time of a run that did not say.
func expiry(p policy, created *time.Time, prog progress, now time.Time) *time.Time {
	if p.annotations.keep || !p.hasTTL() {
		return nil
	}
	var deadline *time.Time
	if ttl := p.annotations.ttl; ttl != nil {
		deadline = add(*firstOf(created, &now), *ttl)
	}
	if prog.finished {
		t := p.ttls()
		ttl := t.afterSucceeded
		if prog.outcome == failed {
			ttl = t.afterFailed
		}
		if ttl != nil {
			if at := add(*firstOf(prog.at, &now), *ttl); at != nil && (deadline == nil || at.Before(*deadline)) {
				deadline = at
			}
		}
	}
	return deadline
}

// formatTimestamp is RFC 3339 in UTC, with fractional seconds only when there are any.
func formatTimestamp(at time.Time) string {
	return at.UTC().Format(time.RFC3339Nano)
}

// stamp sets kube-retention's expires-at stamp (and the managed label) where the expiry is
// computable, and removes a stamp no TTL stands behind any more. keep leaves the stamp alone.
func stamp(k *kind, obj object, now time.Time) {
	p, _ := readPolicy(k, obj)
	created := timestamp(obj, "metadata.creationTimestamp")
	a := p.annotations
	switch at := expiry(p, created, progressOf(k.finish, obj), now); {
	case at != nil:
		if a.expiresAt == nil || !a.expiresAt.Equal(*at) || a.stamped == nil || !a.stamped.Equal(*at) {
			value := formatTimestamp(*at)
			setMetadataEntry(obj, "annotations", expiresAtKey, value)
			setMetadataEntry(obj, "annotations", stampedKey, value)
		}
	case !a.keep && a.carriesStamp():
		// No deadline of kube-retention's stands behind the stamp any more.
		annotations := objectAt(obj, "metadata", "annotations")
		delete(annotations, expiresAtKey)
		delete(annotations, stampedKey)
	}
	if p.hasTTL() || a.ownDeadline() != nil {
		setMetadataEntry(obj, "labels", managedLabel, "true")
	}
}
