package main

import (
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
	api := httptest.NewServer(up)
	t.Cleanup(api.Close)
	target, _ := url.Parse(api.URL)
	v := &PromView{Upstream: target, Filter: NewFilter([]string{"node-ops"}), Transport: http.DefaultTransport,
		Log: log.New(os.Stderr, "test: ", 0)}
	srv := httptest.NewServer(v.handler())
	t.Cleanup(srv.Close)
	return srv
}

func fetch(t *testing.T, method, u string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
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
