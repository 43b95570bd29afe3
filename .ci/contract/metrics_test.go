package contract_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// tool returns the path of an executable on PATH. When it is missing the
// test is skipped, or fails when TEST_REQUIRE_TOOLS is set (as
// .ci/run and .ci/contract.sh set it).
func tool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := fmt.Sprintf("%s not on PATH (Debian: apt-get install -y --no-install-recommends prometheus)", name)
	if os.Getenv("TEST_REQUIRE_TOOLS") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// randomWord is a value no metric label may ever take.
func randomWord(t testing.TB) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "r" + hex.EncodeToString(b)
}

// specFamilies are the metric families of SPEC section 7 that exist in a
// -dev instance once it has answered 200, 401 and 404.
var specFamilies = []string{
	"plantstore_http_requests_total",
	"plantstore_http_request_duration_seconds",
	"plantstore_http_requests_in_flight",
	"plantstore_auth_failures_total",
	"plantstore_plants_returned",
	"plantstore_store_request_duration_seconds",
	"plantstore_catalog_plants",
	"plantstore_build_info",
	"plantstore_jwks_keys",
	"go_goroutines",
	"process_cpu_seconds_total",
}

func TestPromtoolChecksMetrics(t *testing.T) {
	promtool := tool(t, "promtool")
	s := startService(t, "-dev")
	token := s.Tokens[s.Users[0]]

	// Traffic of every kind, with request-made values that must never
	// become label values.
	path, sub := randomWord(t), randomWord(t)
	garbage := mintLikeGarbage(sub)
	for _, r := range []struct {
		method, target string
		header         http.Header
	}{
		{"GET", "/plants", bearer(token)},
		{"GET", "/plants?limit=1", bearer(token)},
		{"GET", "/plants?limit=x", bearer(token)},
		{"GET", "/plants", nil},
		{"GET", "/plants", bearer(garbage)},
		{"GET", "/" + path, bearer(token)},
		{"POST", "/plants", bearer(token)},
		{"HEAD", "/plants", bearer(token)},
	} {
		do(t, r.method, s.API+r.target, r.header)
	}
	metrics := get(t, s.Admin+"/metrics", nil)

	for _, word := range []string{path, sub, garbage} {
		if bytes.Contains(metrics, []byte(word)) {
			t.Errorf("/metrics contains %q, a value taken from a request", word)
		}
	}
	for _, fam := range specFamilies {
		if !regexp.MustCompile(`(?m)^# TYPE ` + regexp.QuoteMeta(fam) + ` `).Match(metrics) {
			t.Errorf("/metrics after traffic: no family %s (SPEC section 7)", fam)
		}
	}

	tests := []struct {
		name   string
		input  []byte
		wantOK bool
	}{
		{name: "service /metrics", input: metrics, wantOK: true},
		{name: "counter without _total", input: []byte("# HELP plantstore_requests Requests.\n# TYPE plantstore_requests counter\nplantstore_requests 1\n")},
		{name: "not the text format", input: []byte("plantstore_requests{code=200} one\n")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(promtool, "check", "metrics")
			cmd.Stdin = bytes.NewReader(tc.input)
			out, err := cmd.CombinedOutput()
			if ok := err == nil; ok != tc.wantOK {
				t.Errorf("promtool check metrics on %s: exit %v, want success %v\n%s", tc.name, err, tc.wantOK, out)
			}
		})
	}
}

// mintLikeGarbage is a token-shaped string carrying word; the service must
// refuse it without the word reaching a label.
func mintLikeGarbage(word string) string {
	return "eyJhbGciOiJFZERTQSJ9." + word + ".c2ln"
}

// prometheus is a running Prometheus server.
type prometheus struct {
	URL string
}

// startPrometheus runs Debian's prometheus on a free 127.0.0.1 port with
// .ci/prometheus/prometheus.yml.in filled in for target, its TSDB in a
// temporary directory and flags added, and stops it when the test ends.
func startPrometheus(t testing.TB, target string, flags ...string) *prometheus {
	t.Helper()
	bin := tool(t, "prometheus")
	promtool := tool(t, "promtool")
	dir := t.TempDir()

	tmpl, err := os.ReadFile(filepath.Join("..", "prometheus", "prometheus.yml.in"))
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, bytes.ReplaceAll(tmpl, []byte("@TARGET@"), []byte(target)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "config", config).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}

	logPath := filepath.Join(dir, "prometheus.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, append([]string{
		"--config.file=" + config,
		"--storage.tsdb.path=" + filepath.Join(dir, "tsdb"),
		"--web.listen-address=127.0.0.1:0",
		"--log.level=info"}, flags...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting prometheus: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})

	// Prometheus logs the bound address: msg="Listening on" address=127.0.0.1:NNNNN.
	listening := regexp.MustCompile(`msg="Listening on" address=(127\.0\.0\.1:[0-9]+)`)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if m := listening.FindStringSubmatch(readFile(t, logPath)); m != nil {
			p := &prometheus{URL: "http://" + m[1]}
			waitReady(t, p.URL+"/-/ready")
			return p
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("prometheus exited at start: %v\n%s", err, readFile(t, logPath))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus: no \"Listening on\" line within 15s\n%s", readFile(t, logPath))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sample is one element of an instant vector.
type sample struct {
	Metric map[string]string
	Time   float64
	Value  float64
}

// query evaluates an instant PromQL query.
func (p *prometheus) query(t testing.TB, q string) []sample {
	t.Helper()
	body := get(t, p.URL+"/api/v1/query?query="+url.QueryEscape(q), nil)
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("query %s: %v in %s", q, err, body)
	}
	if r.Status != "success" || r.Data.ResultType != "vector" {
		t.Fatalf("query %s: status %s, type %s, error %q", q, r.Status, r.Data.ResultType, r.Error)
	}
	var out []sample
	for _, x := range r.Data.Result {
		ts, _ := x.Value[0].(float64)
		vs, _ := x.Value[1].(string)
		v, err := strconv.ParseFloat(vs, 64)
		if err != nil {
			t.Fatalf("query %s: value %q: %v", q, vs, err)
		}
		out = append(out, sample{Metric: x.Metric, Time: ts, Value: v})
	}
	return out
}

// byLabel maps label's value to the sample value.
func byLabel(samples []sample, label string) map[string]float64 {
	m := map[string]float64{}
	for _, s := range samples {
		m[s.Metric[label]] = s.Value
	}
	return m
}

// waitScrapeAfter waits until Prometheus holds a scrape of the service that
// started after since, so that it saw everything sent before since.
func (p *prometheus) waitScrapeAfter(t testing.TB, since time.Time) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		// timestamp() of a plain selector is the scrape's start; of any
		// other expression it would be the evaluation time.
		s := p.query(t, `timestamp(up{job="plantstore"})`)
		if len(s) == 1 && s[0].Value > float64(since.UnixMilli())/1000 {
			if up := p.query(t, `up{job="plantstore"}`); len(up) != 1 || up[0].Value != 1 {
				t.Fatalf("prometheus: the scrape of plantstore after %s failed: up %v; targets: %s",
					since.Format(time.RFC3339Nano), up, get(t, p.URL+"/api/v1/targets", nil))
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("prometheus: no successful scrape of plantstore after %s within 30s; targets: %s",
		since.Format(time.RFC3339Nano), get(t, p.URL+"/api/v1/targets", nil))
}

func TestPrometheusScrapesTraffic(t *testing.T) {
	s := startService(t, "-dev")
	p := startPrometheus(t, s.AdminAddr)
	token := s.Tokens[s.Users[0]]

	// The first scrape comes about 6s after start (discovery throttle).
	p.waitScrapeAfter(t, time.Unix(0, 0))

	// Two rounds of known traffic, each followed by a scrape, so that rate()
	// over the histogram has two samples of every series.
	const rounds, ok, unauthorized, notFound = 2, 25, 10, 5
	plantsPerList := -1
	for range rounds {
		for range ok {
			e := do(t, "GET", s.API+"/plants", bearer(token))
			var list []json.RawMessage
			if e.Resp.StatusCode != 200 || json.Unmarshal(e.Body, &list) != nil {
				t.Fatalf("GET /plants: status %d, body %q", e.Resp.StatusCode, e.Body)
			}
			plantsPerList = len(list)
		}
		for range unauthorized {
			if e := do(t, "GET", s.API+"/plants", nil); e.Resp.StatusCode != 401 {
				t.Fatalf("GET /plants without token: status %d, want 401", e.Resp.StatusCode)
			}
		}
		for range notFound {
			if e := do(t, "GET", s.API+"/"+randomWord(t), bearer(token)); e.Resp.StatusCode != 404 {
				t.Fatalf("GET /<random>: status %d, want 404", e.Resp.StatusCode)
			}
		}
		p.waitScrapeAfter(t, time.Now())
	}

	if got := byLabel(p.query(t, `up{job="plantstore"}`), "job"); got["plantstore"] != 1 {
		t.Errorf(`up{job="plantstore"}: got %v, want 1`, got)
	}

	counts := []struct {
		query, label string
		want         map[string]float64
	}{
		{`sum by (code) (plantstore_http_requests_total{route="/plants"})`, "code",
			map[string]float64{"200": rounds * ok, "401": rounds * unauthorized}},
		{`sum by (code) (plantstore_http_requests_total{route="unmatched"})`, "code",
			map[string]float64{"404": rounds * notFound}},
		{`sum by (route) (plantstore_http_requests_total)`, "route",
			map[string]float64{"/plants": rounds * (ok + unauthorized), "unmatched": rounds * notFound}},
		{`sum by (method) (plantstore_http_requests_total)`, "method",
			map[string]float64{"GET": rounds * (ok + unauthorized + notFound)}},
		{`sum by (code) (plantstore_http_request_duration_seconds_count{route="/plants"})`, "code",
			map[string]float64{"200": rounds * ok, "401": rounds * unauthorized}},
		{`sum by (reason) (plantstore_auth_failures_total > 0)`, "reason",
			map[string]float64{"missing": rounds * unauthorized}},
		{`sum by (job) (plantstore_plants_returned_count)`, "job",
			map[string]float64{"plantstore": rounds * ok}},
		{`sum by (job) (plantstore_plants_returned_sum)`, "job",
			map[string]float64{"plantstore": float64(rounds * ok * plantsPerList)}},
		{`sum by (job) (plantstore_http_requests_in_flight)`, "job",
			map[string]float64{"plantstore": 0}},
	}
	for _, c := range counts {
		got := byLabel(p.query(t, c.query), c.label)
		if !maps.EqualFunc(got, c.want, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }) {
			t.Errorf("%s: got %v, want %v", c.query, got, c.want)
		}
	}

	// plantstore_build_info carries what "plantstore version" prints.
	out, err := exec.Command(binary, "version").Output()
	if err != nil {
		t.Fatalf("plantstore version: %v", err)
	}
	m := regexp.MustCompile(`^plantstore (\S+) \(revision (\S+), (go\S+)\)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("plantstore version: printed %q, want \"plantstore <version> (revision <rev>, <go version>)\"", out)
	}
	info := p.query(t, `plantstore_build_info`)
	if len(info) != 1 || info[0].Value != 1 || info[0].Metric["version"] != m[1] || info[0].Metric["revision"] != m[2] || info[0].Metric["goversion"] != m[3] {
		t.Errorf("plantstore_build_info: got %v, want one series of value 1 with version %q, revision %q, goversion %q (from plantstore version)", info, m[1], m[2], m[3])
	}

	// The median of requests this small lies well inside the bucket range.
	for _, q := range []string{
		`histogram_quantile(0.5, sum by (le) (rate(plantstore_http_request_duration_seconds_bucket[1m])))`,
		`histogram_quantile(0.5, sum by (le) (increase(plantstore_http_request_duration_seconds_bucket{route="/plants",code="200"}[1m])))`,
		`histogram_quantile(0.99, sum by (le) (plantstore_http_request_duration_seconds_bucket))`,
	} {
		got := p.query(t, q)
		if len(got) != 1 {
			t.Errorf("%s: %d samples, want 1", q, len(got))
			continue
		}
		if v := got[0].Value; math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 || v >= 1 {
			t.Errorf("%s: got %v seconds, want a finite number in (0, 1)", q, v)
		} else {
			t.Logf("%s = %.6f s", q, v)
		}
	}
}

// TestPrometheusStoresExemplars runs the service with tracing on and has a
// real Prometheus, with exemplar storage, scrape it: Prometheus asks for
// OpenMetrics, and the exemplar of a sampled request's duration carries
// the trace id the caller sent (SPEC §12). The exporter points at a
// closed port: an unreachable collector changes nothing for requests.
func TestPrometheusStoresExemplars(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
	s := startService(t, "-dev")
	p := startPrometheus(t, s.AdminAddr, "--enable-feature=exemplar-storage")
	p.waitScrapeAfter(t, time.Unix(0, 0))

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	start := time.Now()
	h := bearer(s.Tokens[s.Users[0]])
	h.Set("Traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	for range 5 {
		if e := do(t, "GET", s.API+"/plants", h); e.Resp.StatusCode != 200 {
			t.Fatalf("GET /plants with a traceparent: status %d", e.Resp.StatusCode)
		}
	}
	p.waitScrapeAfter(t, time.Now())

	q := url.Values{
		"query": {`plantstore_http_request_duration_seconds_bucket{route="/plants"}`},
		"start": {strconv.FormatInt(start.Add(-time.Minute).Unix(), 10)},
		"end":   {strconv.FormatInt(time.Now().Add(time.Minute).Unix(), 10)},
	}
	body := get(t, p.URL+"/api/v1/query_exemplars?"+q.Encode(), nil)
	var r struct {
		Status string `json:"status"`
		Data   []struct {
			Exemplars []struct {
				Labels map[string]string `json:"labels"`
			} `json:"exemplars"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Status != "success" {
		t.Fatalf("query_exemplars: %v, %s", err, body)
	}
	for _, series := range r.Data {
		for _, e := range series.Exemplars {
			if e.Labels["trace_id"] == traceID && len(e.Labels["span_id"]) == 16 {
				return
			}
		}
	}
	t.Errorf("Prometheus holds no exemplar with trace_id %s; query_exemplars answered %s", traceID, body)
}
