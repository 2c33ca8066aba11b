package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// FieldError is one invalid field: where it is, the value as the user wrote it (rendered as
// JSON) and what is wrong with it. It reads
// `spec.retention.ttlAfterFailed: "1d" is not a duration: use h, m, ...`.
type FieldError struct {
	Path  string
	Value string
	Rule  string
}

func newFieldError(path string, value any, rule string) FieldError {
	return FieldError{Path: path, Value: render(value), Rule: rule}
}

func (e FieldError) Error() string {
	return fmt.Sprintf("%s: %s %s", e.Path, e.Value, e.Rule)
}

// listed reports one error as it is, several under "N <heading>:", one per line.
func listed(errs []FieldError, heading string) string {
	if len(errs) == 1 {
		return errs[0].Error()
	}
	lines := make([]string, 0, len(errs))
	for _, err := range errs {
		lines = append(lines, "- "+err.Error())
	}
	return fmt.Sprintf("%d %s:\n%s", len(errs), heading, strings.Join(lines, "\n"))
}

// maxRendered is how many characters of a value a message shows.
const maxRendered = 80

// render writes a value as compact JSON, cut short past maxRendered characters.
func render(value any) string {
	var buf bytes.Buffer
	encoder := json.NewEncoder(&buf)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(value); err != nil {
		return fmt.Sprintf("%v", value)
	}
	text := strings.TrimSuffix(buf.String(), "\n")
	runes := []rune(text)
	if len(runes) <= maxRendered {
		return text
	}
	return string(runes[:maxRendered]) + "…"
}

// without returns the errors of errs that are not in old: on UPDATE only what the change
// introduced is denied.
func without(errs, old []FieldError) []FieldError {
	var introduced []FieldError
	for _, err := range errs {
		if !contains(old, err) {
			introduced = append(introduced, err)
		}
	}
	return introduced
}

func contains(errs []FieldError, want FieldError) bool {
	for _, err := range errs {
		if err == want {
			return true
		}
	}
	return false
}
