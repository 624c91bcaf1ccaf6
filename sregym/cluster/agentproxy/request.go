package main

// The requests of the Prometheus view are rebuilt, not patched: the parameters the query API reads
// are gathered from the query string and (for POST) the form body, each selector is sealed
// (promql.go), and the request is sent with only those parameters, in one place (the query string
// of a GET, the form body of a POST). What Prometheus reads is then exactly what was sealed: a
// second `query` in the body, an unknown parameter or a multipart body cannot slip past.

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// maxFormBytes bounds a POST body (a query of this size is already unusual).
const maxFormBytes = 1 << 20

// The scalar parameters each endpoint may carry besides its selectors (none of them selects series).
var (
	queryParams  = []string{"time", "timeout", "stats", "limit", "lookback_delta"}
	rangeParams  = []string{"start", "end", "step", "timeout", "stats", "limit", "lookback_delta"}
	seriesParams = []string{"start", "end", "limit"}
)

// rewriteRequest seals r's selectors in place, or says why r cannot be served (a bad_data error).
func (s *Sealer) rewriteRequest(r *http.Request) error {
	if r.URL.Path == "/api/v1/metadata" { // metric names and help texts: no selector, no namespace
		return nil
	}
	params, err := requestParams(r)
	if err != nil {
		return err
	}
	out := url.Values{}
	copyScalars := func(names []string) error {
		for _, name := range names {
			if v, ok, err := single(params, name); err != nil {
				return err
			} else if ok {
				out.Set(name, v)
			}
		}
		return nil
	}
	switch r.URL.Path {
	case "/api/v1/query", "/api/v1/query_range":
		names := queryParams
		if r.URL.Path == "/api/v1/query_range" {
			names = rangeParams
		}
		if err := copyScalars(names); err != nil {
			return err
		}
		query, _, err := single(params, "query")
		if err != nil {
			return err
		}
		sealed, err := s.SealQuery(query)
		if err != nil {
			return fmt.Errorf("invalid parameter %q: %w", "query", err)
		}
		out.Set("query", sealed)
	default: // series, labels, label/<name>/values
		if err := copyScalars(seriesParams); err != nil {
			return err
		}
		selectors := params["match[]"]
		if len(selectors) == 0 && r.URL.Path != "/api/v1/series" { // every label otherwise: select the visible ones
			out.Add("match[]", s.AllVisible())
		}
		for _, selector := range selectors {
			sealed, err := s.SealSelector(selector)
			if err != nil {
				return fmt.Errorf("invalid parameter %q: %w", "match[]", err)
			}
			out.Add("match[]", sealed)
		}
	}
	encoded := out.Encode()
	r.TransferEncoding = nil
	r.Header.Del("Content-Length")
	if r.Method == http.MethodPost {
		r.URL.RawQuery = ""
		r.Body, r.ContentLength = io.NopCloser(strings.NewReader(encoded)), int64(len(encoded))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		r.URL.RawQuery = encoded
		r.Body, r.ContentLength = http.NoBody, 0
		r.Header.Del("Content-Type")
	}
	return nil
}

// requestParams reads the query string and, for POST, a form body (the only body Prometheus's
// API reads besides multipart, which is refused here).
func requestParams(r *http.Request) (url.Values, error) {
	params, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("unreadable query string: %v", err)
	}
	if r.Method != http.MethodPost || r.Body == nil {
		return params, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxFormBytes+1))
	if err != nil {
		return nil, fmt.Errorf("unreadable body: %v", err)
	}
	if len(body) > maxFormBytes {
		return nil, fmt.Errorf("the body is larger than %d bytes", maxFormBytes)
	}
	if len(body) == 0 {
		return params, nil
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/x-www-form-urlencoded" {
		return nil, fmt.Errorf("a POST body must be application/x-www-form-urlencoded, not %q", ct)
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("unreadable form body: %v", err)
	}
	for k, vs := range form {
		params[k] = append(params[k], vs...)
	}
	return params, nil
}

// single returns a parameter given at most once (the same value twice is not ambiguous; two
// different values are, since Prometheus would pick one and the view might have sealed the other).
func single(params url.Values, name string) (string, bool, error) {
	vs := params[name]
	if len(vs) == 0 {
		return "", false, nil
	}
	for _, v := range vs[1:] {
		if v != vs[0] {
			return "", false, fmt.Errorf("parameter %q is given %d times with different values", name, len(vs))
		}
	}
	return vs[0], true, nil
}
