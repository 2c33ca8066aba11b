package main

import (
	"sort"
	"strings"
	"time"
)

// The retention.dev/* annotations, which give any object a retention policy.
const (
	annotationPrefix    = "retention.dev/"
	ttlAnnotation       = "retention.dev/ttl"
	succeededAnnotation = "retention.dev/ttl-after-succeeded"
	failedAnnotation    = "retention.dev/ttl-after-failed"
	finishedAnnotation  = "retention.dev/ttl-after-finished"
	expiresAtKey        = "retention.dev/expires-at"
	stampedKey          = "retention.dev/stamped"
	keepAnnotation      = "retention.dev/keep"
	// managedLabel marks every object kube-retention schedules, for its controller's watches.
	managedLabel = "retention.dev/managed"
)

var knownAnnotations = []string{
	ttlAnnotation, succeededAnnotation, failedAnnotation, finishedAnnotation,
	expiresAtKey, stampedKey, keepAnnotation,
}

// annotationPolicy is what an object's annotations say about its retention.
type annotationPolicy struct {
	keep           bool
	ttl            *time.Duration
	afterSucceeded *time.Duration
	afterFailed    *time.Duration
	afterFinished  *time.Duration
	expiresAt      *time.Time
	// stamped is the expires-at value kube-retention wrote itself.
	stamped *time.Time
}

// carriesStamp reports whether expires-at is kube-retention's stamp, not the user's deadline.
func (p annotationPolicy) carriesStamp() bool {
	return p.expiresAt != nil && p.stamped != nil && p.expiresAt.Equal(*p.stamped)
}

// ownDeadline is the user's own absolute deadline: expires-at unless it is the stamp.
func (p annotationPolicy) ownDeadline() *time.Time {
	if p.carriesStamp() {
		return nil
	}
	return p.expiresAt
}

// annotationPath is the path of an annotation as Kubernetes writes it in its own errors.
func annotationPath(key string) string {
	return "metadata.annotations[" + key + "]"
}

// parseAnnotations reads the retention.dev/* annotations, in key order. Invalid values are
// reported and left out of the policy.
func parseAnnotations(annotations map[string]string) (annotationPolicy, []FieldError) {
	var policy annotationPolicy
	var errs []FieldError
	keys := make([]string, 0, len(annotations))
	for key := range annotations {
		if strings.HasPrefix(key, annotationPrefix) {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	for _, key := range keys {
		value := annotations[key]
		fail := func(rule string) { errs = append(errs, newFieldError(annotationPath(key), value, rule)) }
		duration := func(slot **time.Duration) {
			if parsed, rule := parseTTL(value); rule != "" {
				fail(rule)
			} else {
				*slot = &parsed
			}
		}
		switch key {
		case ttlAnnotation:
			duration(&policy.ttl)
		case succeededAnnotation:
			duration(&policy.afterSucceeded)
		case failedAnnotation:
			duration(&policy.afterFailed)
		case finishedAnnotation:
			duration(&policy.afterFinished)
		case expiresAtKey, stampedKey:
			at, err := time.Parse(time.RFC3339, value)
			switch {
			case err != nil:
				fail(`is not an RFC 3339 time: write e.g. "2026-12-31T23:00:00Z"`)
			case key == expiresAtKey:
				policy.expiresAt = &at
			default:
				policy.stamped = &at
			}
		case keepAnnotation:
			switch value {
			case "true":
				policy.keep = true
			case "false":
			default:
				fail(`must be "true" (never delete) or "false"`)
			}
		default:
			fail("is not a kube-retention annotation: use one of " + strings.Join(knownAnnotations, ", "))
		}
	}
	return policy, errs
}

// annotationsOf reads metadata.annotations; values that are not strings are left out.
func annotationsOf(obj object) map[string]string {
	found, _ := field(obj, "metadata.annotations")
	fields, _ := found.(map[string]any)
	annotations := make(map[string]string, len(fields))
	for key, value := range fields {
		if s, ok := value.(string); ok {
			annotations[key] = s
		}
	}
	return annotations
}
