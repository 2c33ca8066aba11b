package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

var (
	buildGVK    = metav1.GroupVersionKind{Group: "shipwright.io", Version: "v1beta1", Kind: "Build"}
	buildRunGVK = metav1.GroupVersionKind{Group: "shipwright.io", Version: "v1beta1", Kind: "BuildRun"}
	configGVK   = metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
)

// request is an admission request for obj (and old, on UPDATE), given as JSON.
func request(t *testing.T, op admissionv1.Operation, gvk metav1.GroupVersionKind, obj, old string) admission.Request {
	t.Helper()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "uid-1", Kind: gvk, Operation: op, Name: "it", Namespace: "ns",
		Object: runtime.RawExtension{Raw: []byte(obj)},
	}}
	if old != "" {
		req.OldObject = runtime.RawExtension{Raw: []byte(old)}
	}
	return req
}

func build(ttlAfterFailed string, succeededLimit int) string {
	spec, _ := json.Marshal(map[string]any{"retention": map[string]any{
		"ttlAfterFailed": ttlAfterFailed, "succeededLimit": succeededLimit,
	}})
	return `{"metadata": {"name": "it", "namespace": "ns"}, "spec": ` + string(spec) + `}`
}

func causeFields(resp admission.Response) []string {
	var fields []string
	if resp.Result != nil && resp.Result.Details != nil {
		for _, cause := range resp.Result.Details.Causes {
			fields = append(fields, cause.Field)
		}
	}
	return fields
}

func TestBuildDeniedForEveryInvalidField(t *testing.T) {
	resp := Validator{}.Handle(context.Background(), request(t, admissionv1.Create, buildGVK, build("1d", 101), ""))
	if resp.Allowed {
		t.Fatal("a Build with two invalid fields was allowed")
	}
	if resp.Result.Code != http.StatusUnprocessableEntity || resp.Result.Reason != metav1.StatusReasonInvalid {
		t.Errorf("status = %d %s, want 422 Invalid", resp.Result.Code, resp.Result.Reason)
	}
	got := strings.Join(causeFields(resp), ",")
	if want := "spec.retention.ttlAfterFailed,spec.retention.succeededLimit"; got != want {
		t.Errorf("causes = %s, want %s", got, want)
	}
	want := "2 retention settings are invalid:\n" +
		`- spec.retention.ttlAfterFailed: "1d" is not a duration: use h, m, s, ms, us or ns, e.g. "36h" or "1h30m"` + "\n" +
		"- spec.retention.succeededLimit: 101 is above the limit of 100: use a whole number from 1 to 100, e.g. 10"
	if resp.Result.Message != want {
		t.Errorf("message =\n%s\nwant\n%s", resp.Result.Message, want)
	}
	if cause := resp.Result.Details.Causes[1]; cause.Type != metav1.CauseTypeFieldValueInvalid ||
		cause.Message != "101 is above the limit of 100: use a whole number from 1 to 100, e.g. 10" {
		t.Errorf("cause = %+v", cause)
	}
}

func TestUpdateKeepingAnOldInvalidValueIsAllowed(t *testing.T) {
	old := build("1d", 5)
	resp := Validator{}.Handle(context.Background(), request(t, admissionv1.Update, buildGVK, build("1d", 5), old))
	if !resp.Allowed {
		t.Fatalf("an update keeping the old invalid TTL was denied: %s", resp.Result.Message)
	}
	resp = Validator{}.Handle(context.Background(), request(t, admissionv1.Update, buildGVK, build("1d", 101), old))
	if resp.Allowed {
		t.Fatal("an update introducing an invalid limit was allowed")
	}
	if got := causeFields(resp); len(got) != 1 || got[0] != "spec.retention.succeededLimit" {
		t.Errorf("causes = %v, want only the limit the update introduced", got)
	}
	if want := "spec.retention.succeededLimit: 101 is above the limit of 100: use a whole number from 1 to 100, e.g. 10"; resp.Result.Message != want {
		t.Errorf("message = %q", resp.Result.Message)
	}
	resp = Validator{}.Handle(context.Background(), request(t, admissionv1.Create, buildGVK, build("1d", 5), ""))
	if resp.Allowed {
		t.Fatal("the same invalid TTL was allowed on CREATE")
	}
}

func TestBuildRunOwnTTLsAreValidated(t *testing.T) {
	run := `{"spec": {"build": {"name": "b"}, "retention": {"ttlAfterSucceeded": "-5s", "ttlAfterFailed": 3}},
	         "status": {"buildSpec": {"retention": {"ttlAfterFailed": "never mind"}}}}`
	resp := Validator{}.Handle(context.Background(), request(t, admissionv1.Create, buildRunGVK, run, ""))
	if resp.Allowed {
		t.Fatal("a BuildRun with invalid TTLs was allowed")
	}
	got := strings.Join(causeFields(resp), ",")
	if want := "spec.retention.ttlAfterSucceeded,spec.retention.ttlAfterFailed"; got != want {
		t.Errorf("causes = %s, want %s (the status snapshot is never a reason to deny)", got, want)
	}
}

func TestAnnotationsAreValidatedOnAnyKind(t *testing.T) {
	cm := `{"metadata": {"annotations": {"retention.dev/ttl": "2 weeks", "retention.dev/keep": "yes",
	        "retention.dev/expires-at": "tomorrow", "retention.dev/tll": "1h", "other/ttl": "x"}}}`
	resp := Validator{}.Handle(context.Background(), request(t, admissionv1.Create, configGVK, cm, ""))
	got := strings.Join(causeFields(resp), ",")
	want := "metadata.annotations[retention.dev/expires-at],metadata.annotations[retention.dev/keep]," +
		"metadata.annotations[retention.dev/tll],metadata.annotations[retention.dev/ttl]"
	if resp.Allowed || got != want {
		t.Errorf("allowed=%v causes = %s, want %s", resp.Allowed, got, want)
	}
	valid := `{"metadata": {"annotations": {"retention.dev/ttl": "1.5h", "retention.dev/expires-at": "2026-12-31T23:00:00+02:00"}}}`
	if resp := (Validator{}).Handle(context.Background(), request(t, admissionv1.Create, configGVK, valid, "")); !resp.Allowed {
		t.Errorf("valid annotations denied: %s", resp.Result.Message)
	}
}

func TestLimitsMustBeWholeNumbersInRange(t *testing.T) {
	obj := `{"spec": {"retention": {"succeededLimit": 5.0, "failedLimit": 0, "atBuildDeletion": "yes"}}}`
	resp := Validator{}.Handle(context.Background(), request(t, admissionv1.Create, buildGVK, obj, ""))
	want := []string{
		"spec.retention.succeededLimit: 5.0 is not a whole number: use a whole number from 1 to 100, e.g. 10",
		"spec.retention.failedLimit: 0 is below 1: use a whole number from 1 to 100, e.g. 10",
		`spec.retention.atBuildDeletion: "yes" must be true or false`,
	}
	if got := resp.Result.Message; got != "3 retention settings are invalid:\n- "+strings.Join(want, "\n- ") {
		t.Errorf("message =\n%s", got)
	}
}
