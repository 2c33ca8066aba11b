package main

import "k8s.io/apimachinery/pkg/runtime/schema"

// ttlFields is a pair of TTL fields (Go duration strings), one per outcome, within the object
// at the dotted path within.
type ttlFields struct {
	within, succeeded, failed string
}

func (f ttlFields) succeededPath() string { return f.within + "." + f.succeeded }
func (f ttlFields) failedPath() string    { return f.within + "." + f.failed }

// runFields is what a parent (a Shipwright Build) sets for the runs it starts.
type runFields struct {
	ttls                        ttlFields
	succeededLimit, failedLimit string
	minLimit, maxLimit          int64
	// ownedByParent, when true, makes each new run owned by the parent.
	ownedByParent string
}

// finishRule is how a kind says that a run finished.
type finishRule int

const (
	notARun finishRule = iota
	// succeededCondition: a Knative-style Succeeded condition (BuildRuns, and any object).
	succeededCondition
	jobConditions
	podPhase
)

// parentRef is how a run names its parent: the label, else the field.
type parentRef struct {
	kind  *kind
	label string
	field string
}

// nameIn is the parent's name as obj gives it.
func (p parentRef) nameIn(obj object) (string, bool) {
	if name, ok := metadataEntry(obj, "labels", p.label); ok {
		return name, true
	}
	return text(obj, p.field)
}

// kind is where a kind keeps its retention settings and how it finishes.
type kind struct {
	gvk    schema.GroupVersionKind
	finish finishRule
	// builtin kinds are the ones kube-retention knows by name; others are plain objects.
	builtin bool
	// own TTLs; a new run copies its parent's run TTLs into them.
	own *ttlFields
	// embedded parent settings in a run, validated like the parent's own.
	embedded *runFields
	// snapshot of the parent's TTLs kept by another system: read, never a reason to deny.
	snapshot *ttlFields
	// runs is what the kind sets for its runs.
	runs   *runFields
	parent *parentRef
}

func shipwrightRetention(within string) *runFields {
	return &runFields{
		ttls:           shipwrightTTLs(within),
		succeededLimit: "succeededLimit",
		failedLimit:    "failedLimit",
		minLimit:       1,
		maxLimit:       100,
		ownedByParent:  "atBuildDeletion",
	}
}

func shipwrightTTLs(within string) ttlFields {
	return ttlFields{within: within, succeeded: "ttlAfterSucceeded", failed: "ttlAfterFailed"}
}

// buildNameLabel is the label Shipwright puts on a BuildRun naming its Build.
const buildNameLabel = "build.shipwright.io/name"

var (
	buildKind = &kind{
		gvk:     schema.GroupVersionKind{Group: "shipwright.io", Version: "v1beta1", Kind: "Build"},
		finish:  notARun,
		builtin: true,
		runs:    shipwrightRetention("spec.retention"),
	}
	buildRunKind = &kind{
		gvk:      schema.GroupVersionKind{Group: "shipwright.io", Version: "v1beta1", Kind: "BuildRun"},
		finish:   succeededCondition,
		builtin:  true,
		own:      ptr(shipwrightTTLs("spec.retention")),
		embedded: shipwrightRetention("spec.build.spec.retention"),
		snapshot: ptr(shipwrightTTLs("status.buildSpec.retention")),
		parent:   &parentRef{kind: buildKind, label: buildNameLabel, field: "spec.build.name"},
	}
	jobKind   = &kind{gvk: schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, finish: jobConditions, builtin: true}
	podKind   = &kind{gvk: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, finish: podPhase, builtin: true}
	plainKind = &kind{finish: succeededCondition}

	handledKinds = []*kind{buildKind, buildRunKind, jobKind, podKind}
)

// outOfScope are the groups this peer leaves alone: OpenShift-style builds, and retention.dev
// policies and Cleaners. The Rust webhook handles them; the comparison does not cover them.
var outOfScope = map[string]bool{"build.openshift.io": true, "retention.dev": true}

// kindFor is the kind of the group and kind (any version), a plain one for kinds it does not
// know, and nil for the ones out of this peer's scope.
func kindFor(group, name string) *kind {
	if outOfScope[group] {
		return nil
	}
	for _, k := range handledKinds {
		if k.gvk.Group == group && k.gvk.Kind == name {
			return k
		}
	}
	return plainKind
}

func ptr[T any](value T) *T { return &value }
