package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// invalidHeading heads a denial listing several invalid fields.
const invalidHeading = "retention settings are invalid"

// Validator denies objects whose retention settings are invalid, naming every bad field.
type Validator struct{}

var _ admission.Handler = Validator{}

// Handle answers one validating AdmissionReview.
func (Validator) Handle(_ context.Context, req admission.Request) admission.Response {
	k, obj, early := subject(req)
	if early != nil {
		return *early
	}
	if obj == nil {
		return admission.Denied("the request carries no object to validate")
	}
	old, err := decodeObject(req.OldObject.Raw, req.Kind)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if errs := newErrors(k, obj, old); len(errs) > 0 {
		return denyInvalid(req, errs)
	}
	return admission.Allowed("")
}

// subject is what both hooks judge: the kind and object of a CREATE or UPDATE, or the answer
// to give at once (other operations and kinds pass; an undecodable object is a bad request). The
// object is nil when the request carries none.
func subject(req admission.Request) (*kind, object, *admission.Response) {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		allowed := admission.Allowed("")
		return nil, nil, &allowed
	}
	k := kindFor(req.Kind.Group, req.Kind.Kind)
	if k == nil {
		allowed := admission.Allowed("")
		return nil, nil, &allowed
	}
	obj, err := decodeObject(req.Object.Raw, req.Kind)
	if err != nil {
		errored := admission.Errored(http.StatusBadRequest, err)
		return nil, nil, &errored
	}
	return k, obj, nil
}

// denyInvalid is a denial that reads well in kubectl apply and lists each field as a cause,
// the way the API server reports its own validation errors (422 Invalid).
func denyInvalid(req admission.Request, errs []FieldError) admission.Response {
	resp := admission.Denied(listed(errs, invalidHeading))
	resp.Result.Code = http.StatusUnprocessableEntity
	resp.Result.Reason = metav1.StatusReasonInvalid
	causes := make([]metav1.StatusCause, 0, len(errs))
	for _, err := range errs {
		causes = append(causes, metav1.StatusCause{
			Type:    metav1.CauseTypeFieldValueInvalid,
			Message: err.Value + " " + err.Rule,
			Field:   err.Path,
		})
	}
	resp.Result.Details = &metav1.StatusDetails{
		Name:   req.Name,
		Group:  req.Kind.Group,
		Kind:   req.Kind.Kind,
		Causes: causes,
	}
	return resp
}

// Mutator copies Build TTLs into new BuildRuns and stamps retention.dev/expires-at wherever
// admission can compute it, answering with a JSON patch.
type Mutator struct {
	Parents Parents
	// Now is the clock; the API server stores times in whole seconds, so the mutator does too.
	Now func() time.Time
}

var _ admission.Handler = &Mutator{}

// Handle answers one mutating AdmissionReview.
func (m *Mutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	k, obj, early := subject(req)
	if early != nil {
		return *early
	}
	creating := req.Operation == admissionv1.Create
	// Invalid settings are the validating webhook's to deny; mutating them would only confuse.
	if obj == nil || len(newErrors(k, obj, nil)) > 0 {
		return admission.Allowed("")
	}
	original, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	warnings := mutate(ctx, m.Parents, k, obj, req.Namespace, creating, m.Now().Truncate(time.Second))
	mutated, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if warning := unhandledWarning(k, obj, req.Namespace); warning != "" {
		warnings = append(warnings, warning)
	}
	return admission.PatchResponseFromRaw(original, mutated).WithWarnings(warnings...)
}

// unhandledWarning warns about retention settings kube-retention will not act on: on a
// cluster-scoped object of a kind it does not know. (The Rust webhook also warns when its
// controller may not delete a kind; this peer does not check permissions.)
func unhandledWarning(k *kind, obj object, namespace string) string {
	if _, managed := metadataEntry(obj, "labels", managedLabel); !managed || k.builtin || namespace != "" {
		return ""
	}
	kindName, _ := obj["kind"].(string)
	return fmt.Sprintf("kube-retention does not delete cluster-scoped objects (%s): these settings have no effect", kindName)
}
