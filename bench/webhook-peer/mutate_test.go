package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// mutator reads parents from a fake client holding objs.
func mutator(objs ...runtime.Object) *Mutator {
	reader := fake.NewClientBuilder().WithRuntimeObjects(objs...).Build()
	return &Mutator{Parents: clientParents{reader: reader}, Now: func() time.Time { return now.Add(300 * time.Millisecond) }}
}

func shipwrightBuild(retention map[string]any) *unstructured.Unstructured {
	b := newBuild()
	b.SetNamespace("ns")
	b.SetName("b")
	b.SetUID("uid-of-b")
	_ = unstructured.SetNestedMap(b.Object, retention, "spec", "retention")
	return b
}

// patched applies the response's patch to the request's object.
func patched(t *testing.T, req admission.Request, resp admission.Response) map[string]any {
	t.Helper()
	if !resp.Allowed {
		t.Fatalf("denied: %v", resp.Result)
	}
	result := req.Object.Raw
	if len(resp.Patches) > 0 {
		ops, err := json.Marshal(resp.Patches)
		if err != nil {
			t.Fatal(err)
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatal(err)
		}
		if result, err = patch.Apply(result); err != nil {
			t.Fatal(err)
		}
	}
	var obj map[string]any
	if err := json.Unmarshal(result, &obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

func metaGVK(group, kind string) metav1.GroupVersionKind {
	return metav1.GroupVersionKind{Group: group, Version: "v1", Kind: kind}
}

func mustText(t *testing.T, obj map[string]any, path string) string {
	t.Helper()
	s, ok := text(obj, path)
	if !ok {
		t.Fatalf("%s is missing from %v", path, obj)
	}
	return s
}

func TestBuildRunInheritsTTLsFieldByField(t *testing.T) {
	m := mutator(shipwrightBuild(map[string]any{
		"ttlAfterSucceeded": "1h30m", "ttlAfterFailed": "36h", "atBuildDeletion": true,
	}))
	run := `{"metadata": {"name": "r", "namespace": "ns"},
	         "spec": {"build": {"name": "b"}, "retention": {"ttlAfterFailed": "10m"}}}`
	req := request(t, admissionv1.Create, buildRunGVK, run, "")
	resp := m.Handle(context.Background(), req)
	obj := patched(t, req, resp)
	if got := mustText(t, obj, "spec.retention.ttlAfterSucceeded"); got != "1h30m" {
		t.Errorf("ttlAfterSucceeded = %q, want the Build's 1h30m", got)
	}
	if got := mustText(t, obj, "spec.retention.ttlAfterFailed"); got != "10m" {
		t.Errorf("ttlAfterFailed = %q, want the BuildRun's own 10m", got)
	}
	owners, _ := field(obj, "metadata.ownerReferences")
	want := `[{"apiVersion":"shipwright.io/v1beta1","kind":"Build","name":"b","uid":"uid-of-b"}]`
	if got, _ := json.Marshal(owners); string(got) != want {
		t.Errorf("ownerReferences = %s, want %s", got, want)
	}
	if got, _ := metadataEntry(obj, "labels", managedLabel); got != "true" {
		t.Errorf("managed label = %q", got)
	}
	if len(resp.Warnings) != 0 {
		t.Errorf("warnings = %v", resp.Warnings)
	}
}

func TestBuildRunOfAMissingBuildIsAdmittedWithAWarning(t *testing.T) {
	run := `{"metadata": {"name": "r", "namespace": "ns"}, "spec": {"build": {"name": "gone"}}}`
	req := request(t, admissionv1.Create, buildRunGVK, run, "")
	resp := mutator().Handle(context.Background(), req)
	if len(resp.Patches) != 0 {
		t.Errorf("patches = %v, want none", resp.Patches)
	}
	want := `Build "gone" not found in ns: admitted without inherited retention settings`
	if len(resp.Warnings) != 1 || resp.Warnings[0] != want {
		t.Errorf("warnings = %v, want [%s]", resp.Warnings, want)
	}
}

func TestConfigMapIsStampedWithExpiresAt(t *testing.T) {
	cm := `{"metadata": {"name": "c", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z",
	        "annotations": {"retention.dev/ttl": "1h30m0.25s"}}}`
	req := request(t, admissionv1.Update, configGVK, cm, cm)
	obj := patched(t, req, mutator().Handle(context.Background(), req))
	annotations := annotationsOf(obj)
	if got, want := annotations[expiresAtKey], "2026-01-01T01:30:00.25Z"; got != want {
		t.Errorf("expires-at = %q, want %q", got, want)
	}
	if annotations[stampedKey] != annotations[expiresAtKey] {
		t.Errorf("stamped = %q, want it equal to expires-at", annotations[stampedKey])
	}
	if got, _ := metadataEntry(obj, "labels", managedLabel); got != "true" {
		t.Errorf("managed label = %q", got)
	}

	// On CREATE the object has no creationTimestamp yet: now, in whole seconds, stands in.
	created := `{"metadata": {"name": "c", "namespace": "ns", "annotations": {"retention.dev/ttl": "10m"}}}`
	req = request(t, admissionv1.Create, configGVK, created, "")
	obj = patched(t, req, mutator().Handle(context.Background(), req))
	if got := annotationsOf(obj)[expiresAtKey]; got != "2026-03-01T12:10:00Z" {
		t.Errorf("expires-at on create = %q", got)
	}
}

func TestJobIsStampedFromItsFinishTime(t *testing.T) {
	job := `{"metadata": {"name": "j", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z",
	         "annotations": {"retention.dev/ttl-after-finished": "1h", "retention.dev/ttl-after-failed": "5m"}},
	         "status": {"conditions": [{"type": "Failed", "status": "True", "lastTransitionTime": "2026-01-02T00:00:00Z"}]}}`
	req := request(t, admissionv1.Update, metaGVK("batch", "Job"), job, job)
	obj := patched(t, req, mutator().Handle(context.Background(), req))
	if got := annotationsOf(obj)[expiresAtKey]; got != "2026-01-02T00:05:00Z" {
		t.Errorf("expires-at = %q, want the failure time + ttl-after-failed", got)
	}
}

func TestStaleStampIsRemoved(t *testing.T) {
	stamp := "2026-01-01T01:00:00Z"
	cm := `{"metadata": {"name": "c", "namespace": "ns", "labels": {"retention.dev/managed": "true"},
	        "annotations": {"retention.dev/expires-at": "` + stamp + `", "retention.dev/stamped": "` + stamp + `", "keep": "me"}}}`
	req := request(t, admissionv1.Update, configGVK, cm, cm)
	obj := patched(t, req, mutator().Handle(context.Background(), req))
	annotations := annotationsOf(obj)
	if _, ok := annotations[expiresAtKey]; ok || len(annotations) != 1 {
		t.Errorf("annotations = %v, want only the unrelated one left", annotations)
	}
}

func TestInvalidObjectsAreNotMutated(t *testing.T) {
	cm := `{"metadata": {"name": "c", "namespace": "ns", "annotations": {"retention.dev/ttl": "1d"}}}`
	resp := mutator().Handle(context.Background(), request(t, admissionv1.Create, configGVK, cm, ""))
	if !resp.Allowed || len(resp.Patches) != 0 {
		t.Errorf("allowed=%v patches=%v, want allowed unchanged", resp.Allowed, resp.Patches)
	}
}

func TestClusterScopedObjectsGetAWarning(t *testing.T) {
	ns := `{"metadata": {"name": "n", "annotations": {"retention.dev/ttl": "1h"}}}`
	req := request(t, admissionv1.Create, metaGVK("", "Namespace"), ns, "")
	req.Namespace = ""
	resp := mutator().Handle(context.Background(), req)
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "cluster-scoped objects (Namespace)") {
		t.Errorf("warnings = %v", resp.Warnings)
	}
}
