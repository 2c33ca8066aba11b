package main

import (
	"fmt"
	"time"
)

// grammarHint says once which durations are allowed, so every denial reads the same.
const grammarHint = `use h, m, s, ms, us or ns, e.g. "36h" or "1h30m"`

// parseTTL parses a time to live with Go's own time.ParseDuration (what Shipwright's
// controller decodes these fields with). Negative values parse but make no sense as a time to
// live. A non-empty rule says what is wrong.
func parseTTL(text string) (time.Duration, string) {
	duration, err := time.ParseDuration(text)
	switch {
	case err != nil:
		return 0, "is not a duration: " + grammarHint
	case duration < 0:
		return 0, `is negative: a time to live must be zero or more, e.g. "0s" or "36h"`
	default:
		return duration, ""
	}
}

// ttls is a time to live per outcome.
type ttls struct {
	afterSucceeded, afterFailed *time.Duration
}

func (t ttls) empty() bool { return t.afterSucceeded == nil && t.afterFailed == nil }

// or is each TTL of t, else of fallback.
func (t ttls) or(fallback ttls) ttls {
	return ttls{
		afterSucceeded: firstOf(t.afterSucceeded, fallback.afterSucceeded),
		afterFailed:    firstOf(t.afterFailed, fallback.afterFailed),
	}
}

func firstOf[T any](values ...*T) *T {
	for _, value := range values {
		if value != nil {
			return value
		}
	}
	return nil
}

// runPolicy is what a parent sets for the runs it starts.
type runPolicy struct {
	ttls                        ttls
	succeededLimit, failedLimit *int64
	atBuildDeletion             bool
}

// policy is everything an object says about retention.
type policy struct {
	annotations annotationPolicy
	own         ttls
	// inherited TTLs: the embedded Build spec, else the snapshot Shipwright keeps.
	inherited ttls
	runs      runPolicy
}

// ttls is the TTL after each outcome: annotations first (the specific ones before
// ttl-after-finished), then the object's own fields, then what it inherited.
func (p policy) ttls() ttls {
	a := p.annotations
	fromAnnotations := ttls{
		afterSucceeded: firstOf(a.afterSucceeded, a.afterFinished),
		afterFailed:    firstOf(a.afterFailed, a.afterFinished),
	}
	return fromAnnotations.or(p.own).or(p.inherited)
}

// hasTTL reports whether any TTL applies, so kube-retention owns expires-at.
func (p policy) hasTTL() bool {
	return p.annotations.ttl != nil || !p.ttls().empty()
}

// readPolicy reads obj's policy by the fields of its kind, reporting every invalid field.
func readPolicy(k *kind, obj object) (policy, []FieldError) {
	annotations, errs := parseAnnotations(annotationsOf(obj))
	r := &reader{obj: obj, errs: errs}
	p := policy{annotations: annotations}
	if k.own != nil {
		p.own = r.ttls(*k.own)
	}
	if k.runs != nil {
		p.runs = r.runs(*k.runs)
	}
	var embedded, snapshot ttls
	if k.embedded != nil {
		embedded = r.runs(*k.embedded).ttls
	}
	if k.snapshot != nil {
		// Another system's copy, not the user's: never a reason to deny.
		snapshot = (&reader{obj: obj}).ttls(*k.snapshot)
	}
	p.inherited = embedded.or(snapshot)
	return p, r.errs
}

// reader reads retention fields of one object, collecting the errors.
type reader struct {
	obj  object
	errs []FieldError
}

func (r *reader) fail(path string, value any, rule string) {
	r.errs = append(r.errs, newFieldError(path, value, rule))
}

func (r *reader) ttls(f ttlFields) ttls {
	if value, ok := field(r.obj, f.within); ok {
		if _, isObject := value.(map[string]any); !isObject {
			r.fail(f.within, value, fmt.Sprintf(`must be an object, e.g. {"%s": "36h"}`, f.succeeded))
		}
	}
	return ttls{
		afterSucceeded: r.duration(f.succeededPath()),
		afterFailed:    r.duration(f.failedPath()),
	}
}

func (r *reader) runs(f runFields) runPolicy {
	p := runPolicy{ttls: r.ttls(f.ttls)}
	within := f.ttls.within
	p.succeededLimit = r.limit(within+"."+f.succeededLimit, f.minLimit, f.maxLimit)
	p.failedLimit = r.limit(within+"."+f.failedLimit, f.minLimit, f.maxLimit)
	if f.ownedByParent != "" {
		p.atBuildDeletion = r.flag(within + "." + f.ownedByParent)
	}
	return p
}

func (r *reader) duration(path string) *time.Duration {
	value, ok := field(r.obj, path)
	if !ok {
		return nil
	}
	s, isString := value.(string)
	if !isString {
		r.fail(path, value, "is not a duration string: "+grammarHint)
		return nil
	}
	duration, rule := parseTTL(s)
	if rule != "" {
		r.fail(path, value, rule)
		return nil
	}
	return &duration
}

func (r *reader) limit(path string, lowest, highest int64) *int64 {
	value, ok := field(r.obj, path)
	if !ok {
		return nil
	}
	example := min(max(10, lowest), highest)
	allowed := fmt.Sprintf("use a whole number from %d to %d, e.g. %d", lowest, highest, example)
	number, whole := asInt64(value)
	switch {
	case !whole:
		r.fail(path, value, "is not a whole number: "+allowed)
	case number > highest:
		r.fail(path, value, fmt.Sprintf("is above the limit of %d: %s", highest, allowed))
	case number < lowest:
		r.fail(path, value, fmt.Sprintf("is below %d: %s", lowest, allowed))
	default:
		return &number
	}
	return nil
}

func (r *reader) flag(path string) bool {
	value, ok := field(r.obj, path)
	if !ok {
		return false
	}
	flag, isBool := value.(bool)
	if !isBool {
		r.fail(path, value, "must be true or false")
	}
	return flag
}

// newErrors is what to deny obj for, given the old object of an UPDATE (nil otherwise): on
// UPDATE only the errors the change introduced, so an object admitted before the webhook was
// installed stays updatable even if its old settings are invalid.
func newErrors(k *kind, obj, old object) []FieldError {
	_, errs := readPolicy(k, obj)
	if old == nil {
		return errs
	}
	_, oldErrs := readPolicy(k, old)
	return without(errs, oldErrs)
}
