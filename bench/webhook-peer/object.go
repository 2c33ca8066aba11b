package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// object is a Kubernetes object as decoded JSON. Numbers are json.Number, so a whole number
// and a fraction ("5" and "5.0") stay apart, as they do for the Rust webhook.
type object = map[string]any

// decodeObject decodes the object of an admission request with its apiVersion and kind taken
// from the request, so its kind is known even when a client left them out. A missing object
// is nil without an error.
func decodeObject(raw []byte, gvk metav1.GroupVersionKind) (object, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.UseNumber()
	var decoded object
	if err := decoder.Decode(&decoded); err != nil {
		return nil, fmt.Errorf("malformed object: %w", err)
	}
	if decoded == nil {
		return nil, nil
	}
	apiVersion := gvk.Version
	if gvk.Group != "" {
		apiVersion = gvk.Group + "/" + gvk.Version
	}
	decoded["apiVersion"] = apiVersion
	decoded["kind"] = gvk.Kind
	return decoded, nil
}

// field looks up a dotted path (`spec.retention.ttlAfterFailed`); null reads as absent.
func field(value any, path string) (any, bool) {
	for _, key := range strings.Split(path, ".") {
		fields, ok := value.(map[string]any)
		if !ok {
			return nil, false
		}
		value = fields[key]
	}
	return value, value != nil
}

// text is the string at a dotted path.
func text(value any, path string) (string, bool) {
	found, _ := field(value, path)
	s, ok := found.(string)
	return s, ok
}

// metadataEntry is a label or annotation (map is "labels" or "annotations").
func metadataEntry(obj object, kind, key string) (string, bool) {
	entries, _ := field(obj, "metadata."+kind)
	fields, _ := entries.(map[string]any)
	value, ok := fields[key].(string)
	return value, ok
}

// objectAt is the JSON object at path, created (or replacing a non-object) where missing.
func objectAt(obj object, path ...string) object {
	current := obj
	for _, key := range path {
		next, ok := current[key].(map[string]any)
		if !ok {
			next = object{}
			current[key] = next
		}
		current = next
	}
	return current
}

// setMetadataEntry sets a label or annotation, leaving an equal one alone.
func setMetadataEntry(obj object, kind, key, value string) {
	entries := objectAt(obj, "metadata", kind)
	if current, ok := entries[key].(string); !ok || current != value {
		entries[key] = value
	}
}

// asInt64 is a JSON whole number that fits 64 bits; fractions ("5.0") and strings are not.
func asInt64(value any) (int64, bool) {
	switch number := value.(type) {
	case json.Number:
		n, err := strconv.ParseInt(string(number), 10, 64)
		return n, err == nil
	case int64:
		return number, true
	case int:
		return int64(number), true
	default:
		return 0, false
	}
}

// sameJSON reports whether two values encode to the same JSON.
func sameJSON(a, b any) bool {
	left, errLeft := json.Marshal(a)
	right, errRight := json.Marshal(b)
	return errLeft == nil && errRight == nil && bytes.Equal(left, right)
}
