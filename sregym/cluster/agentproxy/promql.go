package main

// The agent's queries are rewritten before Prometheus sees them, so a hidden namespace's series
// never enter a computation: filtering answers by label is not enough, since an aggregation
// (`sum by (pod)`, `count`, `topk`, `label_replace`, a binary operation...) drops the namespace
// label before the answer is filtered. Every selector of a query, and every match[] selector of
// the series and label APIs, gets a matcher `<label>!~"<hidden>|..."` ANDed to its own, for every
// label name Prometheus holds (as prom-label-proxy does for one label with an equality matcher): a
// series whose `kubernetes_namespace`, `destination_namespace`, `target` or any other label names a
// hidden namespace is the fault plane's as much as one whose `namespace` does. PromQL cannot match
// "any label", so the view asks Prometheus for its label names before it seals each request
// (PromView.sealerNow); a label absent from a series matches `!~` as the empty value does.
//
// The parser is Prometheus's own, pinned in go.mod to the version of the Prometheus the view
// serves (Debian bookworm's 2.42.0, module v0.42.0), so both read a query alike. The rewritten
// text is parsed again and must print to itself with every selector sealed before it is sent.

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// namespaceLabels are the labels that name a series' namespace: the scrape configuration's target
// label, and the name Prometheus gives an exporter's own `namespace` label when the two collide.
var namespaceLabels = []string{"namespace", "exported_namespace"}

// Sealer rewrites PromQL so that no selector can select a series of a hidden namespace.
type Sealer struct {
	hidden   map[string]bool
	pattern  string            // the hidden names, regex-quoted, sorted, joined by |
	names    []string          // the label names sealed: the namespace labels and ForLabels' names
	matchers []*labels.Matcher // one per sealed label name
}

// NewSealer excludes the given namespaces.
func NewSealer(hidden []string) *Sealer {
	s := &Sealer{hidden: map[string]bool{}}
	var quoted []string
	for _, ns := range hidden {
		if ns = strings.TrimSpace(ns); ns != "" && !s.hidden[ns] {
			s.hidden[ns] = true
			quoted = append(quoted, regexp.QuoteMeta(ns))
		}
	}
	if len(quoted) == 0 {
		return s
	}
	sort.Strings(quoted)
	s.pattern = strings.Join(quoted, "|")
	return s.ForLabels(nil)
}

// ForLabels returns a sealer that excludes the hidden names under each of the given label names
// as well as under the namespace labels (the label names Prometheus holds when a request comes).
func (s *Sealer) ForLabels(names []string) *Sealer {
	out := &Sealer{hidden: s.hidden, pattern: s.pattern}
	seen := map[string]bool{}
	for _, name := range append(append([]string{}, namespaceLabels...), names...) {
		if !seen[name] && labelName.MatchString(name) {
			seen[name] = true
			out.names = append(out.names, name)
		}
	}
	sort.Strings(out.names)
	if s.pattern == "" {
		return out
	}
	for _, name := range out.names {
		out.matchers = append(out.matchers, labels.MustNewMatcher(labels.MatchNotRegexp, name, s.pattern))
	}
	return out
}

// Bounds on what is parsed and printed: printing copies each subtree's text once per level above
// it, so a deep query costs its size times its depth.
const (
	maxQueryBytes  = 256 << 10
	maxDepth       = 1000
	maxSealedBytes = 8 << 20 // each selector grows by one matcher per label name Prometheus holds
)

// labelName is Prometheus's label name syntax; anything else is not a label a selector could name.
var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

var errUnsealed = errors.New("the query could not be rewritten to leave out hidden namespaces")

// SealQuery returns the query with every selector sealed, or the parser's error.
func (s *Sealer) SealQuery(query string) (string, error) {
	if len(query) > maxQueryBytes {
		return "", fmt.Errorf("the query is longer than %d bytes", maxQueryBytes)
	}
	expr, err := parser.ParseExpr(query)
	if err != nil {
		return "", err
	}
	depth := 0
	parser.Inspect(expr, func(node parser.Node, path []parser.Node) error {
		depth = max(depth, len(path))
		if vs, ok := node.(*parser.VectorSelector); ok { // a matrix selector's and a subquery's too
			s.seal(vs)
		}
		return nil
	})
	if depth > maxDepth {
		return "", fmt.Errorf("the query nests deeper than %d levels", maxDepth)
	}
	sealed := expr.String()
	if len(sealed) > maxSealedBytes {
		return "", fmt.Errorf("the query has too many selectors: sealed, it is longer than %d bytes", maxSealedBytes)
	}
	if again, err := parser.ParseExpr(sealed); err != nil || again.String() != sealed || !s.allSealed(again) {
		return "", errUnsealed
	}
	return sealed, nil
}

// SealSelector returns a match[] selector (`up`, `{job="x"}`) with the hidden namespaces left out.
func (s *Sealer) SealSelector(selector string) (string, error) {
	if len(selector) > maxQueryBytes {
		return "", fmt.Errorf("the selector is longer than %d bytes", maxQueryBytes)
	}
	ms, err := parser.ParseMetricSelector(selector)
	if err != nil {
		return "", err
	}
	if matchesEmpty(ms) { // Prometheus's own rule, checked before the exclusion is added
		return "", errors.New("match[] must contain at least one non-empty matcher")
	}
	vs := &parser.VectorSelector{LabelMatchers: ms}
	s.seal(vs)
	sealed := vs.String()
	if again, err := parser.ParseMetricSelector(sealed); err != nil || !s.excludes(again) {
		return "", errUnsealed
	}
	return sealed, nil
}

// AllVisible is the match[] selector of every series outside the hidden namespaces: what the label
// APIs get when the agent gives none (a selector must have a matcher that refuses the empty value).
func (s *Sealer) AllVisible() string {
	vs := &parser.VectorSelector{LabelMatchers: []*labels.Matcher{
		labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".+")}}
	s.seal(vs)
	return vs.String()
}

// seal ANDs the exclusion to a selector's matchers. A label already pinned by equality to a visible
// value (`namespace="shop"`) excludes the hidden names by itself and is left as written, so
// absent() keeps answering with that label.
func (s *Sealer) seal(vs *parser.VectorSelector) {
	for _, m := range s.matchers {
		pinned := false
		for _, own := range vs.LabelMatchers {
			if own.Name == m.Name && own.Type == labels.MatchEqual && !s.hidden[own.Value] {
				pinned = true
			}
		}
		if !pinned {
			vs.LabelMatchers = append(vs.LabelMatchers, m)
		}
	}
}

// excludes reports whether matchers select no series with a sealed label naming a hidden namespace.
func (s *Sealer) excludes(ms []*labels.Matcher) bool {
	for _, name := range s.names {
		for ns := range s.hidden {
			refused := false
			for _, m := range ms {
				refused = refused || m.Name == name && !m.Matches(ns)
			}
			if !refused {
				return false
			}
		}
	}
	return true
}

func matchesEmpty(ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches("") {
			return false
		}
	}
	return true
}

func (s *Sealer) allSealed(expr parser.Expr) bool {
	ok := true
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if vs, isSel := node.(*parser.VectorSelector); isSel && !s.excludes(vs.LabelMatchers) {
			ok = false
		}
		return nil
	})
	return ok
}
