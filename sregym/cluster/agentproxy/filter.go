package main

// What the agent must not see: objects of the hidden namespaces, the hidden Namespace objects,
// Events about them, and PersistentVolumes bound to their claims. Pure functions over decoded
// JSON, so they are tested without a cluster.

import (
	"encoding/json"
	"strings"
)

// Filter removes the fault plane from decoded API responses.
type Filter struct {
	Hidden map[string]bool
}

// NewFilter hides the given namespaces.
func NewFilter(namespaces []string) *Filter {
	f := &Filter{Hidden: map[string]bool{}}
	for _, n := range namespaces {
		if n = strings.TrimSpace(n); n != "" {
			f.Hidden[n] = true
		}
	}
	return f
}

func str(m map[string]any, keys ...string) string {
	var cur any = m
	for _, k := range keys {
		obj, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = obj[k]
	}
	s, _ := cur.(string)
	return s
}

// mentions reports whether a free-text field names a hidden namespace as a namespace/name pair
// or quoted (how Kubernetes messages spell a namespaced object).
func (f *Filter) mentions(text string) bool {
	for ns := range f.Hidden {
		if strings.Contains(text, ns+"/") || strings.Contains(text, `"`+ns+`"`) {
			return true
		}
	}
	return false
}

// HiddenObject reports whether one API object belongs to the fault plane. namespaces is true when
// the object came from the namespaces collection (Table rows may lack a kind).
func (f *Filter) HiddenObject(obj map[string]any, namespaces bool) bool {
	if f.Hidden[str(obj, "metadata", "namespace")] {
		return true
	}
	kind := str(obj, "kind")
	if (kind == "Namespace" || (namespaces && kind == "")) && f.Hidden[str(obj, "metadata", "name")] {
		return true
	}
	switch kind {
	case "Event":
		for _, ref := range []string{"involvedObject", "regarding", "related"} {
			if f.Hidden[str(obj, ref, "namespace")] {
				return true
			}
			if str(obj, ref, "kind") == "Namespace" && f.Hidden[str(obj, ref, "name")] {
				return true
			}
		}
		if f.mentions(str(obj, "message")) || f.mentions(str(obj, "note")) {
			return true
		}
	case "PersistentVolume":
		if f.Hidden[str(obj, "spec", "claimRef", "namespace")] {
			return true
		}
	}
	return false
}

// Clean filters a decoded response in place: list items, Table rows (a row without its object is
// dropped: it cannot be judged), and reports whether the whole object is hidden.
func (f *Filter) Clean(obj map[string]any, namespaces bool) (hidden bool) {
	if f.HiddenObject(obj, namespaces) {
		return true
	}
	removed := false
	if items, ok := obj["items"].([]any); ok {
		kept := items[:0]
		for _, it := range items {
			m, ok := it.(map[string]any)
			if ok && f.Clean(m, namespaces) {
				removed = true
				continue
			}
			kept = append(kept, it)
		}
		obj["items"] = kept
	}
	if rows, ok := obj["rows"].([]any); ok && str(obj, "kind") == "Table" {
		kept := rows[:0]
		for _, r := range rows {
			row, _ := r.(map[string]any)
			inner, _ := row["object"].(map[string]any)
			if inner == nil || f.Clean(inner, namespaces) {
				removed = true
				continue
			}
			kept = append(kept, r)
		}
		obj["rows"] = kept
	}
	if removed {
		// a count that includes hidden objects would betray them
		if md, ok := obj["metadata"].(map[string]any); ok {
			delete(md, "remainingItemCount")
		}
	}
	return false
}

// CleanEvent filters one watch event; it reports whether the event is to be dropped. A Table event
// whose rows were all hidden is dropped too.
func (f *Filter) CleanEvent(ev map[string]any, namespaces bool) (drop bool) {
	obj, ok := ev["object"].(map[string]any)
	if !ok {
		return false
	}
	if t, _ := ev["type"].(string); t == "ERROR" || t == "BOOKMARK" {
		return false
	}
	rows, isTable := obj["rows"].([]any)
	if f.Clean(obj, namespaces) {
		return true
	}
	if isTable && len(rows) > 0 {
		after, _ := obj["rows"].([]any)
		return len(after) == 0
	}
	return false
}

// decode reads JSON keeping numbers exact (resource versions, large quantities).
func decode(dec *json.Decoder) (map[string]any, error) {
	dec.UseNumber()
	var m map[string]any
	err := dec.Decode(&m)
	return m, err
}
