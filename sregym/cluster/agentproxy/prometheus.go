package main

// The agent's view of Prometheus: only the query API (instant and range queries, series, label
// names and values, metric metadata), with every series of a hidden namespace removed twice: the
// request's PromQL is rewritten so Prometheus never selects such a series (promql.go), and the
// answer is filtered by label as a second layer. Targets,
// service discovery, status (which shows the scrape configuration), admin, federation, rules and
// alerts are not served: they describe the grader's Prometheus, not the system under test.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"strings"
)

// PromView proxies the read-only query API of one Prometheus.
type PromView struct {
	Upstream  *url.URL
	Filter    *Filter
	Sealer    *Sealer
	Transport http.RoundTripper
	Log       interface{ Printf(string, ...any) }
}

var promPaths = map[string]bool{
	"/api/v1/query": true, "/api/v1/query_range": true, "/api/v1/series": true,
	"/api/v1/labels": true, "/api/v1/metadata": true,
}

// promAllowed reports whether path is part of the query API.
func promAllowed(p string) bool {
	if promPaths[p] {
		return true
	}
	segs := segments(p)
	return len(segs) == 5 && segs[0] == "api" && segs[1] == "v1" && segs[2] == "label" && segs[4] == "values"
}

func (v *PromView) handler() http.Handler {
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(v.Upstream)
			pr.Out.URL.Path = strings.TrimSuffix(v.Upstream.Path, "/") + pr.In.URL.Path
			pr.Out.URL.RawPath = ""
			pr.Out.Header.Del("Accept-Encoding")
			pr.Out.Header.Del("Authorization")
		},
		Transport:      v.Transport,
		ModifyResponse: v.modifyResponse,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			v.Log.Printf("prometheus view: %s %s: %v", r.Method, r.URL.Path, err)
			promError(w, http.StatusBadGateway, "unavailable", "the metrics backend could not serve this request")
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawPath != "" && r.URL.RawPath != r.URL.Path || path.Clean("/"+r.URL.Path) != r.URL.Path ||
			!promAllowed(r.URL.Path) {
			promError(w, http.StatusNotFound, "not_found", "only the query API is served here: query, query_range, "+
				"series, labels, label/<name>/values, metadata")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			promError(w, http.StatusMethodNotAllowed, "bad_data", "GET or POST only")
			return
		}
		sealer, err := v.sealerNow(r)
		if err != nil {
			v.Log.Printf("prometheus view: the label names: %v", err)
			promError(w, http.StatusBadGateway, "unavailable", "the metrics backend could not serve this request")
			return
		}
		if err := sealer.rewriteRequest(r); err != nil {
			promError(w, http.StatusBadRequest, "bad_data", err.Error())
			return
		}
		r.RequestURI = ""
		rp.ServeHTTP(w, r)
	})
}

// sealerNow is the view's sealer for every label name Prometheus holds right now (asked on each
// request, so a label that appears later is sealed from the next query on; the answer filter
// catches a series that survives unaggregated in between). Without the names, nothing is sent.
func (v *PromView) sealerNow(r *http.Request) (*Sealer, error) {
	if r.URL.Path == "/api/v1/metadata" { // no selector to seal
		return v.Sealer, nil
	}
	u := *v.Upstream
	u.Path = strings.TrimSuffix(v.Upstream.Path, "/") + "/api/v1/labels"
	u.RawQuery = ""
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	transport := v.Transport
	if transport == nil {
		transport = http.DefaultTransport
	}
	resp, err := transport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var answer struct {
		Status string   `json:"status"`
		Data   []string `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&answer); err != nil {
		return nil, fmt.Errorf("HTTP %d, unreadable: %w", resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK || answer.Status != "success" {
		return nil, fmt.Errorf("HTTP %d, status %q", resp.StatusCode, answer.Status)
	}
	return v.Sealer.ForLabels(answer.Data), nil
}

func promError(w http.ResponseWriter, code int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "error", "errorType": kind, "error": msg})
}

// hiddenLabels reports whether a label set belongs to a hidden namespace: any label value equal to
// a hidden namespace's name (namespace, exported_namespace, kubernetes_namespace...).
func (f *Filter) hiddenLabels(m map[string]any) bool {
	for _, v := range m {
		if s, ok := v.(string); ok && f.Hidden[s] {
			return true
		}
	}
	return false
}

// CleanPrometheus removes hidden series from a query API answer's data.
func (f *Filter) CleanPrometheus(data any) any {
	switch d := data.(type) {
	case map[string]any: // query and query_range: {"resultType":..., "result": [...]}
		if result, ok := d["result"].([]any); ok {
			kept := result[:0]
			for _, s := range result {
				if m, ok := s.(map[string]any); ok {
					if labels, ok := m["metric"].(map[string]any); ok && f.hiddenLabels(labels) {
						continue
					}
				}
				kept = append(kept, s)
			}
			d["result"] = kept
		}
		return d
	case []any: // series (label sets) or label names/values (strings)
		kept := d[:0]
		for _, it := range d {
			switch x := it.(type) {
			case map[string]any:
				if f.hiddenLabels(x) {
					continue
				}
			case string:
				if f.Hidden[x] {
					continue
				}
			}
			kept = append(kept, it)
		}
		return kept
	}
	return data
}

func (v *PromView) modifyResponse(resp *http.Response) error {
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("unreadable answer from Prometheus: %w", err)
	}
	if data, ok := doc["data"]; ok {
		doc["data"] = v.Filter.CleanPrometheus(data)
	}
	if body, err = json.Marshal(doc); err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", fmt.Sprint(len(body)))
	resp.Header.Del("Content-Encoding")
	return nil
}
