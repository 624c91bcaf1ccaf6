package main

import (
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
)

func startProm(t *testing.T, up *upstream) *httptest.Server {
	t.Helper()
	api := httptest.NewServer(withLabelNames(up, "__name__", "namespace", "pod"))
	t.Cleanup(api.Close)
	target, _ := url.Parse(api.URL)
	v := &PromView{Upstream: target, Filter: NewFilter([]string{"node-ops"}), Sealer: NewSealer([]string{"node-ops"}), Transport: http.DefaultTransport,
		Log: log.New(os.Stderr, "test: ", 0)}
	srv := httptest.NewServer(v.handler())
	t.Cleanup(srv.Close)
	return srv
}

// withLabelNames answers the view's own label-name lookup (GET /api/v1/labels without parameters)
// as a Prometheus holding these label names would, and passes every other request to h.
func withLabelNames(h http.Handler, names ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/labels" && r.URL.RawQuery == "" && r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": names})
			return
		}
		h.ServeHTTP(w, r)
	})
}

func fetch(t *testing.T, method, u string) (int, string) {
	t.Helper()
	return send(t, method, u, "")
}

func TestOnlyTheQueryAPIIsServed(t *testing.T) {
	up := &upstream{body: `{"status":"success","data":[]}`}
	srv := startProm(t, up)
	for _, p := range []string{"/api/v1/targets?state=dropped", "/api/v1/targets/metadata", "/api/v1/status/config",
		"/api/v1/status/flags", "/api/v1/admin/tsdb/delete_series", "/federate?match[]=up", "/api/v1/rules",
		"/api/v1/alerts", "/api/v1/alertmanagers", "/api/v1/query/../targets", "/api/v1/label/pod/values/x", "/graph"} {
		up.got = nil
		if code, _ := fetch(t, "GET", srv.URL+p); code != 404 || up.got != nil {
			t.Errorf("%s: %d, forwarded=%v", p, code, up.got != nil)
		}
	}
	for _, p := range []string{"/api/v1/query?query=up", "/api/v1/query_range?query=up&start=1&end=2&step=1",
		"/api/v1/series?match[]=up", "/api/v1/labels", "/api/v1/label/pod/values", "/api/v1/metadata"} {
		for _, m := range []string{"GET", "POST"} {
			if code, _ := fetch(t, m, srv.URL+p); code != 200 {
				t.Errorf("%s %s: %d", m, p, code)
			}
		}
	}
	if code, _ := fetch(t, "DELETE", srv.URL+"/api/v1/query"); code != 405 {
		t.Errorf("DELETE: %d", code)
	}
}

func TestHiddenSeriesAreRemoved(t *testing.T) {
	cases := map[string]string{
		"/api/v1/query?query=up": `{"status":"success","data":{"resultType":"vector","result":[
			{"metric":{"namespace":"shop","pod":"web-1"},"value":[1,"1"]},
			{"metric":{"exported_namespace":"node-ops","pod":"agent-x"},"value":[1,"1"]}]}}`,
		"/api/v1/series?match[]=up":      `{"status":"success","data":[{"namespace":"shop","pod":"web-1"},{"namespace":"node-ops","pod":"agent-x"}]}`,
		"/api/v1/label/namespace/values": `{"status":"success","data":["shop","node-ops","agent-x"]}`,
	}
	for p, body := range cases {
		srv := startProm(t, &upstream{body: body})
		code, got := fetch(t, "GET", srv.URL+p)
		if code != 200 || strings.Contains(got, "node-ops") || !strings.Contains(got, "web-1") && !strings.Contains(got, "shop") {
			t.Errorf("%s: %d %s", p, code, got)
		}
		if p == "/api/v1/query?query=up" && strings.Contains(got, "agent-x") {
			t.Errorf("hidden series kept: %s", got)
		}
	}
}

// seen records what reached the stand-in Prometheus: method, query string, form body.
type seen struct {
	method, rawQuery, body, contentType string
	form                                url.Values // query string and body, as Prometheus reads them
}

type recordingProm struct{ got []seen }

func (p *recordingProm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(r.URL.RawQuery)
	if r.Method == http.MethodPost {
		inBody, _ := url.ParseQuery(string(body))
		for k, vs := range inBody {
			form[k] = append(form[k], vs...)
		}
	}
	p.got = append(p.got, seen{r.Method, r.URL.RawQuery, string(body), r.Header.Get("Content-Type"), form})
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"status":"success","data":[]}`)
}

func startRecording(t *testing.T) (*recordingProm, *httptest.Server) {
	t.Helper()
	rec := &recordingProm{}
	_, srv := startView(t, withLabelNames(rec, "__name__", "namespace", "pod"))
	return rec, srv
}

// startView serves the view of a stand-in Prometheus: (the stand-in, the view).
func startView(t *testing.T, prom http.Handler) (*httptest.Server, *httptest.Server) {
	t.Helper()
	api := httptest.NewServer(prom)
	t.Cleanup(api.Close)
	target, _ := url.Parse(api.URL)
	v := &PromView{Upstream: target, Filter: NewFilter(testHidden), Sealer: NewSealer(testHidden),
		Transport: http.DefaultTransport, Log: log.New(os.Stderr, "test: ", 0)}
	srv := httptest.NewServer(v.handler())
	t.Cleanup(srv.Close)
	return api, srv
}

func send(t *testing.T, method, u, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestQueriesAreRewrittenBeforePrometheusSeesThem(t *testing.T) {
	agg := url.QueryEscape(`sum by (pod) (rate(container_cpu_usage_seconds_total[1m]))`)
	cases := []struct{ method, path, body string }{
		{"GET", "/api/v1/query?query=" + agg + "&time=1700000000", ""},
		{"POST", "/api/v1/query", "query=" + agg + "&time=1700000000"},
		{"POST", "/api/v1/query?time=1700000000", "query=" + agg},
		{"POST", "/api/v1/query?query=" + agg, ""},
		{"GET", "/api/v1/query_range?query=" + agg + "&start=1&end=2&step=1", ""},
		{"POST", "/api/v1/query_range", "query=" + agg + "&start=1&end=2&step=1"},
	}
	for _, c := range cases {
		rec, srv := startRecording(t)
		if code, body := send(t, c.method, srv.URL+c.path, c.body); code != 200 || len(rec.got) != 1 {
			t.Errorf("%s %s %s: %d %s", c.method, c.path, c.body, code, body)
			continue
		}
		got := rec.got[0]
		if len(got.form["query"]) != 1 {
			t.Errorf("%s %s: forwarded %v", c.method, c.path, got.form)
			continue
		}
		assertSealed(t, c.path, got.form["query"][0])
		if got.method == "POST" && (got.rawQuery != "" || got.contentType != "application/x-www-form-urlencoded") {
			t.Errorf("POST forwarded with a query string %q or a body of type %q", got.rawQuery, got.contentType)
		}
		for _, p := range []string{"time", "start", "end", "step"} {
			if strings.Contains(c.path+c.body, p+"=") && len(got.form[p]) != 1 {
				t.Errorf("%s %s: %s lost: %v", c.method, c.path, p, got.form)
			}
		}
	}
}

func TestAmbiguousOrUnreadableRequestsAreRefused(t *testing.T) {
	up, hidden := url.QueryEscape("up"), url.QueryEscape(`count by (pod) (kube_pod_info)`)
	cases := []struct{ method, path, body, ct string }{
		{"GET", "/api/v1/query?query=" + up + "&query=" + hidden, "", ""},
		{"POST", "/api/v1/query?query=" + up, "query=" + hidden, "application/x-www-form-urlencoded"},
		{"POST", "/api/v1/query", "query=" + up + "&query=" + hidden, "application/x-www-form-urlencoded"},
		{"GET", "/api/v1/query?query=" + up + "&time=1&time=2", "", ""},
		{"GET", "/api/v1/query?query=up;query=" + hidden, "", ""},
		{"GET", "/api/v1/query?query=%zz", "", ""},
		{"POST", "/api/v1/query", `{"query":"up"}`, "application/json"},
		{"POST", "/api/v1/query", "--x\r\nContent-Disposition: form-data; name=\"query\"\r\n\r\nup\r\n--x--\r\n",
			"multipart/form-data; boundary=x"},
		{"POST", "/api/v1/query", "query=" + strings.Repeat("up+%2B+", 300000) + "up", "application/x-www-form-urlencoded"},
		{"GET", "/api/v1/query?query=" + url.QueryEscape(`sum by (pod) (`), "", ""},
		{"GET", "/api/v1/query_range?start=1&end=2&step=1", "", ""},
		{"GET", "/api/v1/series?match[]=" + url.QueryEscape(`sum(up)`), "", ""},
		{"GET", "/api/v1/label/pod/values?match[]=", "", ""},
	}
	for _, c := range cases {
		rec, srv := startRecording(t)
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
		if c.ct != "" {
			req.Header.Set("Content-Type", c.ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || len(rec.got) != 0 || !strings.Contains(string(b), `"errorType":"bad_data"`) ||
			!strings.Contains(string(b), `"status":"error"`) {
			t.Errorf("%s %s %.80s: %d forwarded=%d %s", c.method, c.path, c.body, resp.StatusCode, len(rec.got), b)
		}
	}
}

func TestAParseErrorHasPrometheusShapeAndTheParsersMessage(t *testing.T) {
	_, srv := startRecording(t)
	code, body := send(t, "GET", srv.URL+"/api/v1/query?query="+url.QueryEscape(`sum by (pod) (`), "")
	if code != 400 || !strings.Contains(body, `invalid parameter \"query\": 1:15: parse error`) {
		t.Errorf("%d %s", code, body)
	}
}

func TestSeriesAndLabelSelectorsAreSealed(t *testing.T) {
	rec, srv := startRecording(t)
	m1, m2 := url.QueryEscape(`{pod=~"fault.*"}`), url.QueryEscape(`kube_pod_info{namespace="node-ops"}`)
	requests := []struct{ method, path, body string }{
		{"GET", "/api/v1/series?match[]=" + m1 + "&match[]=" + m2 + "&start=1", ""},
		{"POST", "/api/v1/series?match[]=" + m1, "match[]=" + m2},
		{"GET", "/api/v1/labels?match[]=" + m1, ""},
		{"POST", "/api/v1/label/pod/values", "match[]=" + m1 + "&match[]=" + m2},
		{"GET", "/api/v1/labels", ""},
		{"GET", "/api/v1/label/pod/values?start=1&end=2", ""},
		{"POST", "/api/v1/label/__name__/values", ""},
	}
	wantMatches := []int{2, 2, 1, 2, 1, 1, 1}
	for i, c := range requests {
		if code, body := send(t, c.method, srv.URL+c.path, c.body); code != 200 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, code, body)
		}
		got := rec.got[len(rec.got)-1]
		if len(got.form["match[]"]) != wantMatches[i] {
			t.Errorf("%s %s: forwarded match[] %v", c.method, c.path, got.form["match[]"])
		}
		for _, sel := range got.form["match[]"] {
			assertSealed(t, c.path, sel)
		}
	}
}

func TestOnlyKnownParametersAreForwarded(t *testing.T) {
	rec, srv := startRecording(t)
	send(t, "GET", srv.URL+"/api/v1/query?query=up&time=5&timeout=10s&stats=all&x=1&match[]=up&_=2", "")
	got := rec.got[0].form
	for _, p := range []string{"x", "match[]", "_"} {
		if _, ok := got[p]; ok {
			t.Errorf("%s forwarded: %v", p, got)
		}
	}
	for _, p := range []string{"query", "time", "timeout", "stats"} {
		if len(got[p]) != 1 {
			t.Errorf("%s not forwarded: %v", p, got)
		}
	}
	// metadata carries no selector: forwarded as asked
	send(t, "GET", srv.URL+"/api/v1/metadata?metric=up&limit=3", "")
	if q := rec.got[1].rawQuery; q != "metric=up&limit=3" {
		t.Errorf("metadata query %q", q)
	}
}

func TestEveryLabelPrometheusHoldsIsSealedNotOnlyTheNamespaceLabels(t *testing.T) {
	// the stand-in's TSDB holds series under these label names; it records the agent's requests that
	// reach it, not the view's own label-name lookups
	rec := &recordingProm{}
	api, srv := startView(t, withLabelNames(rec, append([]string{"__name__", "job", "namespace", "pod"}, otherLabels...)...))
	agg := url.QueryEscape(`count by (pod) (istio_requests_total)`)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/v1/query?query=" + agg, ""},
		{"POST", "/api/v1/query_range", "query=" + agg + "&start=1&end=2&step=1"},
		{"GET", "/api/v1/series?match[]=" + url.QueryEscape(`{destination_namespace=~".+"}`), ""},
		{"GET", "/api/v1/label/destination_namespace/values", ""},
		{"POST", "/api/v1/labels", ""},
	} {
		rec.got = nil
		if code, body := send(t, c.method, srv.URL+c.path, c.body); code != 200 || len(rec.got) != 1 {
			t.Fatalf("%s %s: %d %s (%d forwarded)", c.method, c.path, code, body, len(rec.got))
		}
		selectors := rec.got[0].form["match[]"]
		if q := rec.got[0].form.Get("query"); q != "" {
			selectors = []string{q}
		}
		for _, sel := range selectors {
			for _, name := range otherLabels {
				if !strings.Contains(sel, name+`!~"a\\.b|node-ops"`) {
					t.Errorf("%s %s: %s forwarded without excluding %s", c.method, c.path, sel, name)
				}
			}
		}
	}
	// the label names cannot be learned: the view refuses to answer rather than send a query unsealed
	api.Close()
	if code, _ := fetch(t, "GET", srv.URL+"/api/v1/query?query=up"); code != http.StatusBadGateway {
		t.Errorf("without the label names: %d", code)
	}
}
