package main

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Parents reads the parent a new run inherits from.
type Parents interface {
	// Get is the parent as JSON, nil without an error when it does not exist.
	Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (object, error)
}

// clientParents reads parents with a controller-runtime client; in main it is the manager's
// client, which reads unstructured objects from an informer cache.
type clientParents struct {
	reader client.Reader
}

func (p clientParents) Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (object, error) {
	parent := &unstructured.Unstructured{}
	parent.SetGroupVersionKind(gvk)
	err := p.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, parent)
	switch {
	// A kind the cluster does not serve (the Build CRD is not installed) has no such object.
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return parent.Object, nil
}

// newBuild is an empty unstructured Shipwright Build, for the manager's cache.
func newBuild() *unstructured.Unstructured {
	build := &unstructured.Unstructured{}
	build.SetGroupVersionKind(buildKind.gvk)
	return build
}
