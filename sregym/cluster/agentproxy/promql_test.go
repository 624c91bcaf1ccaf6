package main

import (
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

var testHidden = []string{"node-ops", "a.b"}

// selectsNothingHidden is the property the rewrite must give every selector, checked here on its
// own: for each namespace label and each hidden namespace, some matcher on that label refuses the
// hidden name (matchers are ANDed, so no series in a hidden namespace can be selected).
func selectsNothingHidden(ms []*labels.Matcher) bool {
	for _, name := range []string{"namespace", "exported_namespace"} {
		for _, ns := range testHidden {
			refused := false
			for _, m := range ms {
				if m.Name == name && !m.Matches(ns) {
					refused = true
				}
			}
			if !refused {
				return false
			}
		}
	}
	return true
}

// assertSealed parses what would be sent to Prometheus and checks every selector in it.
func assertSealed(t *testing.T, original, sealed string) {
	t.Helper()
	expr, err := parser.ParseExpr(sealed)
	if err != nil {
		t.Fatalf("%s -> %s: does not parse: %v", original, sealed, err)
	}
	selectors := 0
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			selectors++
			if !selectsNothingHidden(vs.LabelMatchers) {
				t.Errorf("%s -> %s: selector %s can select a hidden namespace", original, sealed, vs)
			}
		}
		return nil
	})
	if selectors == 0 && strings.ContainsAny(original, "{[") {
		t.Errorf("%s -> %s: no selector found", original, sealed)
	}
}

// What an agent would try to learn the fault plane's pods and their activity from.
var attacks = []string{
	`sum by (pod) (rate(container_cpu_usage_seconds_total[1m]))`,
	`count by (pod)(kube_pod_info)`,
	`count(up)`,
	`group by (pod, namespace)({__name__=~".+"})`,
	`topk(5, container_memory_working_set_bytes)`,
	`bottomk by (namespace) (1, up)`,
	`count_values("pod", up)`,
	`label_replace(up, "namespace", "shop", "namespace", ".*")`,
	`label_join(up, "ns", ",", "namespace", "pod")`,
	`{__name__="up", namespace=~".*"}`,
	`{__name__="up", namespace="node-ops"}`,
	`up{namespace!="shop"}`,
	`up{namespace=~"node-ops|shop", exported_namespace=""}`,
	`up{namespace="shop"} or on() up`,
	`up + on(pod) group_left(namespace) kube_pod_info`,
	`up unless kube_pod_info`,
	`vector(1) and on() count(up) > 0`,
	`scalar(count(up)) * 2`,
	`absent(up{namespace="node-ops"})`,
	`absent_over_time(up{namespace="node-ops"}[1h])`,
	`max_over_time(sum by (pod) (rate(x[1m]))[30m:15s] @ end() offset 1m)`,
	`rate(x[5m] @ 1700000000 offset -1m)`,
	`x @ start()`,
	`histogram_quantile(0.9, sum by (le, pod) (rate(h_bucket[5m])))`,
	`sort_desc(sum by (pod) (increase(container_restarts_total[1h])))`,
	`changes(kube_pod_info[1h:])`,
	`timestamp(up) - time()`,
	`quantile_over_time(0.5, up[10m])`,
	`holt_winters(x[10m], 0.5, 0.5)`,
	`-(up)`,
	`(((up)))`,
	`up == bool 1`,
	`count({__name__!=""})`,
	`{job=~".+"}[5m:1m]`,
	`"a string"`,
	`1`,
}

func TestEverySelectorOfAQueryExcludesTheHiddenNamespaces(t *testing.T) {
	s := NewSealer(testHidden)
	for _, q := range attacks {
		sealed, err := s.SealQuery(q)
		if err != nil {
			t.Errorf("%s: %v", q, err)
			continue
		}
		assertSealed(t, q, sealed)
	}
}

func TestTheAddedMatcherIsRegexQuotedAndAnded(t *testing.T) {
	s := NewSealer(testHidden)
	sealed, err := s.SealQuery(`sum by (pod) (rate(container_cpu_usage_seconds_total{namespace=~".*"}[1m]))`)
	if err != nil {
		t.Fatal(err)
	}
	want := `sum by (pod) (rate(container_cpu_usage_seconds_total{exported_namespace!~"a\\.b|node-ops",` +
		`namespace!~"a\\.b|node-ops",namespace=~".*"}[1m]))`
	if sealed != want {
		t.Errorf("got  %s\nwant %s", sealed, want)
	}
	// "a.b" is a name, not a pattern: aXb stays visible
	expr, _ := parser.ParseExpr(sealed)
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			for _, m := range vs.LabelMatchers {
				if m.Type == labels.MatchNotRegexp && !m.Matches("aXb") {
					t.Errorf("%s refuses aXb", m)
				}
			}
		}
		return nil
	})
}

func TestAVisibleNamespaceByEqualityKeepsAbsentsLabels(t *testing.T) {
	// namespace="shop" already excludes every hidden namespace: no namespace matcher is added, so
	// absent() still answers {namespace="shop"} as Prometheus would
	sealed, err := NewSealer(testHidden).SealQuery(`absent(up{namespace="shop"})`)
	if err != nil {
		t.Fatal(err)
	}
	if want := `absent(up{exported_namespace!~"a\\.b|node-ops",namespace="shop"})`; sealed != want {
		t.Errorf("got %s, want %s", sealed, want)
	}
	assertSealed(t, "absent", sealed)
}

func TestMatchSelectorsAreSealed(t *testing.T) {
	s := NewSealer(testHidden)
	for _, sel := range []string{`up`, `{__name__=~".+"}`, `{pod=~"fault.*"}`, `up{namespace="node-ops"}`,
		`{namespace=~".+"}`} {
		sealed, err := s.SealSelector(sel)
		if err != nil {
			t.Errorf("%s: %v", sel, err)
			continue
		}
		assertSealed(t, sel, sealed)
		if _, err := parser.ParseMetricSelector(sealed); err != nil {
			t.Errorf("%s -> %s: not a selector: %v", sel, sealed, err)
		}
	}
	// no match[] given: one that selects every visible series
	all := s.AllVisible()
	assertSealed(t, "(none)", all)
	if ms, err := parser.ParseMetricSelector(all); err != nil || len(ms) < 3 {
		t.Errorf("%s: %v %v", all, ms, err)
	}
}

func TestAQueryThatDoesNotParseIsRefusedWithTheParsersMessage(t *testing.T) {
	s := NewSealer(testHidden)
	for _, q := range []string{``, `sum by (pod) (`, `up{namespace="x"`, `rate(up)`, `up[5m]` + `[1m]`, `{}`,
		`{namespace!~"node-ops"} `, `foo{__name__="bar"}`} {
		if sealed, err := s.SealQuery(q); err == nil {
			t.Errorf("%q was accepted: %s", q, sealed)
		} else if !strings.Contains(err.Error(), "parse error") {
			t.Errorf("%q: %v", q, err)
		}
	}
	for _, sel := range []string{``, `sum(up)`, `up[5m]`, `{}`, `{pod=~".*"}`, `{namespace!~"node-ops"}`} {
		if sealed, err := s.SealSelector(sel); err == nil {
			t.Errorf("match[]=%q was accepted: %s", sel, sealed)
		}
	}
}

func TestVeryLongAndDeeplyNestedQueries(t *testing.T) {
	s := NewSealer(testHidden)
	// long but shallow: accepted
	wide := `count({pod=~"` + strings.Repeat("web-[0-9]+|", 20000) + `x"})`
	if sealed, err := s.SealQuery(wide); err != nil {
		t.Errorf("a 200 KB selector: %v", err)
	} else {
		assertSealed(t, "wide", sealed)
	}
	chain := strings.Repeat("up + ", 500) + "up"
	if sealed, err := s.SealQuery(chain); err != nil {
		t.Errorf("500 terms: %v", err)
	} else if n := strings.Count(sealed, `namespace!~"a\\.b|node-ops"`); n != 2*501 {
		t.Errorf("%d matchers for 501 selectors", n)
	}
	// printing a tree copies each subtree once per level above it: depth and size are bounded so
	// that a query cannot keep the view busy
	for what, q := range map[string]string{
		"deep chain":  strings.Repeat("up + ", 20000) + "up",
		"deep parens": strings.Repeat("(", 20000) + "up" + strings.Repeat(")", 20000),
		"deep calls":  strings.Repeat("abs(", 5000) + "up" + strings.Repeat(")", 5000),
		"too long":    `up{pod=~"` + strings.Repeat("x", maxQueryBytes) + `"}`,
	} {
		if sealed, err := s.SealQuery(q); err == nil {
			t.Errorf("%s accepted: %.100s", what, sealed)
		}
	}
	if _, err := s.SealSelector(`up{pod=~"` + strings.Repeat("x", maxQueryBytes) + `"}`); err == nil {
		t.Errorf("a too long match[] accepted")
	}
	// No wall-clock bound here: the depth and size limits asserted above are what keep the view
	// free, and a timed assertion only measured the CI machine's load (6.2 s at load 6.8).
}

// Labels other than `namespace` that name a namespace in real exporters: Istio's and Linkerd's
// peers, kube-state-metrics' `exported_namespace`, a relabelled `__meta_kubernetes_namespace`, an
// exporter of its own. A series carrying a hidden namespace's name under any of them is the fault
// plane's too; an aggregation drops the label before the answer filter could see it.
var otherLabels = []string{"kubernetes_namespace", "destination_namespace", "source_workload_namespace",
	"k8s_namespace_name", "meta_kubernetes_namespace", "target"}

func TestASeriesNamingAHiddenNamespaceUnderAnyLabelIsSealedOut(t *testing.T) {
	s := NewSealer(testHidden).ForLabels(append([]string{"__name__", "pod", "namespace"}, otherLabels...))
	for _, q := range append(attacks, `count by (pod) (istio_requests_total{destination_namespace=~".+"})`,
		`sum(rate(container_cpu_usage_seconds_total{kubernetes_namespace="node-ops"}[1m]))`) {
		sealed, err := s.SealQuery(q)
		if err != nil {
			t.Errorf("%s: %v", q, err)
			continue
		}
		expr, _ := parser.ParseExpr(sealed)
		parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
			if vs, ok := node.(*parser.VectorSelector); ok {
				for _, name := range otherLabels {
					for _, hidden := range testHidden {
						if !refuses(vs.LabelMatchers, name, hidden) {
							t.Errorf("%s -> %s: selects %s=%q", q, sealed, name, hidden)
						}
					}
				}
			}
			return nil
		})
	}
	for _, sel := range []string{`up`, `{destination_namespace=~".+"}`} {
		sealed, err := s.SealSelector(sel)
		ms, _ := parser.ParseMetricSelector(sealed)
		if err != nil || !refuses(ms, "destination_namespace", "node-ops") || !refuses(ms, "target", "a.b") {
			t.Errorf("match[]=%s -> %s (%v)", sel, sealed, err)
		}
	}
	if ms, _ := parser.ParseMetricSelector(s.AllVisible()); !refuses(ms, "kubernetes_namespace", "node-ops") {
		t.Errorf("the label APIs' default selector %s", s.AllVisible())
	}
	// a label pinned to a visible value needs no exclusion of its own; the others still get one
	sealed, _ := s.SealQuery(`absent(up{kubernetes_namespace="shop"})`)
	if strings.Contains(sealed, `{kubernetes_namespace!~`) || strings.Contains(sealed, `,kubernetes_namespace!~`) ||
		!strings.Contains(sealed, `destination_namespace!~`) {
		t.Errorf("pinned: %s", sealed)
	}
}

// refuses reports whether some matcher on label name refuses value.
func refuses(ms []*labels.Matcher, name, value string) bool {
	for _, m := range ms {
		if m.Name == name && !m.Matches(value) {
			return true
		}
	}
	return false
}
