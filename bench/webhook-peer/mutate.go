package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// mutate changes obj (already valid) in place for a CREATE (creating) or UPDATE in namespace
// ("" for a cluster-scoped object) and returns warnings for its writer:
//
//   - a new BuildRun naming a Build copies the Build's ttlAfterSucceeded / ttlAfterFailed into
//     spec.retention, field by field where the BuildRun sets none, and with atBuildDeletion
//     true becomes owned by the Build;
//   - any object with a TTL gets retention.dev/expires-at (with retention.dev/stamped) once it
//     can be computed, and the retention.dev/managed label; a stamp no TTL stands behind any
//     more is taken off.
func mutate(ctx context.Context, parents Parents, k *kind, obj object, namespace string, creating bool, now time.Time) []string {
	var warnings []string
	if creating && namespace != "" && k.parent != nil {
		if name, ok := k.parent.nameIn(obj); ok {
			warnings = inherit(ctx, parents, k, obj, namespace, name)
		}
	}
	stamp(k, obj, now)
	return warnings
}

// inherit copies the parent's TTLs for its runs into the run's own TTL fields where the run
// sets none, and makes the run owned by the parent where the parent asks for that. A missing
// parent never blocks the run: it is admitted with a warning.
func inherit(ctx context.Context, parents Parents, run *kind, obj object, namespace, name string) []string {
	parentKind := run.parent.kind
	if run.own == nil || parentKind.runs == nil {
		return nil
	}
	what := parentKind.gvk.Kind
	parent, err := parents.Get(ctx, parentKind.gvk, namespace, name)
	switch {
	case err != nil:
		return []string{fmt.Sprintf("%s %q could not be read (%v): admitted without inherited retention settings", what, name, err)}
	case parent == nil:
		return []string{fmt.Sprintf("%s %q not found in %s: admitted without inherited retention settings", what, name, namespace)}
	}
	p, _ := readPolicy(parentKind, parent)
	from, to := parentKind.runs.ttls, *run.own
	for _, pair := range []struct {
		from, to, name string
		valid          bool
	}{
		{from.succeededPath(), to.succeededPath(), to.succeeded, p.runs.ttls.afterSucceeded != nil},
		{from.failedPath(), to.failedPath(), to.failed, p.runs.ttls.afterFailed != nil},
	} {
		value, ok := field(parent, pair.from)
		if !ok || !pair.valid {
			continue
		}
		if _, set := field(obj, pair.to); !set {
			objectAt(obj, strings.Split(to.within, ".")...)[pair.name] = value
		}
	}
	if p.runs.atBuildDeletion {
		ownBy(obj, parent, parentKind)
	}
	return nil
}

// ownBy adds an owner reference to the parent, unless obj already has one to it.
func ownBy(obj, parent object, parentKind *kind) {
	uid, hasUID := field(parent, "metadata.uid")
	name, hasName := field(parent, "metadata.name")
	if !hasUID || !hasName {
		return
	}
	metadata := objectAt(obj, "metadata")
	references, _ := metadata["ownerReferences"].([]any)
	for _, reference := range references {
		if fields, ok := reference.(map[string]any); ok && sameJSON(fields["uid"], uid) {
			return
		}
	}
	apiVersion, ok := parent["apiVersion"]
	if !ok {
		apiVersion = parentKind.gvk.GroupVersion().String()
	}
	metadata["ownerReferences"] = append(references, map[string]any{
		"apiVersion": apiVersion,
		"kind":       parentKind.gvk.Kind,
		"name":       name,
		"uid":        uid,
	})
}
