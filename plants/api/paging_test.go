package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/api"
)

// linkRE is the one form of the Link header the API sends.
var linkRE = regexp.MustCompile(`^<([^<>]*)>; rel="next"$`)

// nextOf returns the target of r's Link header, and "" when it has none;
// a Link of another form fails the test.
func nextOf(t testing.TB, r response) string {
	t.Helper()
	links := r.header.Values("Link")
	if len(links) == 0 {
		return ""
	}
	m := linkRE.FindStringSubmatch(links[0])
	if len(links) != 1 || m == nil {
		t.Fatalf("Link %q; want one <...>; rel=\"next\"", links)
	}
	return m[1]
}

// names decodes a 200's body into the plants' names.
func names(t testing.TB, r response) []string {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d (%s); want 200", r.status, r.body)
	}
	var ps []struct{ Name string }
	if err := json.Unmarshal(r.body, &ps); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// walk follows next links from target until none is left, and returns
// every name listed and the number of pages.
func walk(t testing.TB, ta *testAPI, target string, headers ...string) ([]string, int) {
	t.Helper()
	var all []string
	for pages := 1; ; pages++ {
		r := ta.do(t, "GET", target, headers...)
		all = append(all, names(t, r)...)
		next := nextOf(t, r)
		if next == "" {
			return all, pages
		}
		if !strings.HasPrefix(next, "/plants?") {
			t.Fatalf("next %q; want a relative /plants link", next)
		}
		if pages > 10_000 {
			t.Fatal("no end to the pages")
		}
		target = next
	}
}

// TestPagingWalk: following next from limit=N lists, for every sample user,
// exactly the full list, in pages of N but the last, and the last page has
// no Link, even when it is exactly full.
func TestPagingWalk(t *testing.T) {
	ta := newTestAPI(t, plants.NewMemoryStore(plants.SampleCatalog(), nil))
	for _, u := range plants.SampleUsers() {
		h := as(u.Subject, u.Groups...)
		full := names(t, ta.do(t, "GET", "/plants", h...))
		for _, limit := range []int{1, 2, 3, 7, len(full) - 1, len(full), len(full) + 1} {
			got, pages := walk(t, ta, fmt.Sprintf("/plants?limit=%d", limit), h...)
			if strings.Join(got, "\n") != strings.Join(full, "\n") {
				t.Errorf("%s limit=%d: pages listed\n%q\nwant\n%q", u.Subject, limit, got, full)
			}
			if want := max(1, (len(full)+limit-1)/limit); pages != want {
				t.Errorf("%s limit=%d: %d pages; want %d", u.Subject, limit, pages, want)
			}
		}
	}
}

// TestPagingLink: the Link's shape and the parameters it keeps, escaped,
// and only limit once they would be over 1 KiB; none for limit=0, without
// limit, or when nothing remains.
func TestPagingLink(t *testing.T) {
	c := plants.SampleCatalog()
	all := c.Plants()
	cursor1 := plants.KeyOf(all[0]).Cursor()
	store := plants.NewMemoryStore(c, nil)
	ta := newTestAPI(t, store)
	srv := httptest.NewServer(newEngineAt(store, zap.NewNop(), api.NewMetrics(prometheus.NewRegistry()), "https://api.example.com/v1"))
	t.Cleanup(srv.Close)
	public := &testAPI{srv: srv}
	h := as("dave", "botanists", "gardeners") // reads the first plant
	for _, tt := range []struct {
		api    *testAPI
		target string
		want   string // "" for no Link
	}{
		{ta, "/plants?limit=1", "/plants?limit=1&after=" + cursor1},
		{public, "/plants?limit=1", "https://api.example.com/v1/plants?limit=1&after=" + cursor1},
		{ta, "/plants?x=a%20b&limit=1&y&after=" + plants.KeyOf(plants.Plant{Name: "A", ID: "a"}).Cursor() + "&z=%3C", "/plants?x=a%20b&limit=1&y&z=%3C&after=" + cursor1},
		{ta, "/plants?limit=01&tag=%E2%9C%93", "/plants?limit=01&tag=%E2%9C%93&after=" + cursor1},
		{ta, "/plants?limit=1&q=\"{a|b}\"^`\\", "/plants?limit=1&q=%22%7Ba%7Cb%7D%22%5E%60%5C&after=" + cursor1},                            // sent unescaped, escaped in the Link
		{ta, "/plants?limit=1&q=a,b;c", "/plants?limit=1&q=a%2Cb%3Bc&after=" + cursor1},                                                     // what readers of Link split on, escaped
		{ta, "/plants?q=" + strings.Repeat(",", 2000) + "&limit=1&r=s", "/plants?limit=1&after=" + cursor1},                                 // 6,000 bytes escaped: limit alone kept
		{ta, "/plants?q=" + strings.Repeat(",", 300) + "&limit=1", "/plants?q=" + strings.Repeat("%2C", 300) + "&limit=1&after=" + cursor1}, // under the bound: kept
		{ta, "/plants?limit=0", ""},
		{ta, "/plants", ""},
		{ta, "/plants?after=" + cursor1, ""},
		{ta, "/plants?limit=1000", ""},
		{ta, "/plants?limit=1&after=" + plants.KeyOf(all[len(all)-1]).Cursor(), ""},
	} {
		r := tt.api.do(t, "GET", tt.target, h...)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", tt.target, r.status, r.body)
		}
		if got := nextOf(t, r); got != tt.want {
			t.Errorf("%s: next %q; want %q", tt.target, got, tt.want)
		}
		head := tt.api.do(t, "HEAD", tt.target, h...)
		if got := nextOf(t, head); got != tt.want {
			t.Errorf("HEAD %s: next %q; want %q", tt.target, got, tt.want)
		}
	}
	// Without limit, after still applies.
	got := names(t, ta.do(t, "GET", "/plants?after="+plants.KeyOf(all[len(all)-2]).Cursor(), as("x")...))
	want := []string{}
	if plants.Readable(all[len(all)-1].Readers, plants.Caller{Subject: "x"}) {
		want = append(want, all[len(all)-1].Name)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("after the last but one: %q; want %q", got, want)
	}
}

// TestPagingLargePages: a page larger than the first chunk still gets the
// right Link (found before the headers go out), and the walk is whole.
func TestPagingLargePages(t *testing.T) {
	const n = 3000
	ps := make([]plants.Plant, n)
	for i := range ps {
		ps[i] = plants.Plant{Name: fmt.Sprintf("plant %05d %s", (i*7919)%n, strings.Repeat("x", 40)), Readers: []string{"*"}}
	}
	c, err := plants.NewCatalog(ps)
	if err != nil {
		t.Fatal(err)
	}
	ta := newTestAPI(t, plants.NewMemoryStore(c, nil))
	sorted := c.Plants()
	for _, limit := range []int{999, 1000, 1500, 2999, 3000, 3001} {
		got, pages := walk(t, ta, fmt.Sprintf("/plants?limit=%d", limit), as("x")...)
		if len(got) != n || pages != (n+limit-1)/limit {
			t.Errorf("limit=%d: %d plants in %d pages; want %d in %d", limit, len(got), pages, n, (n+limit-1)/limit)
		}
		for i, name := range got {
			if want := sorted[i].Name; name != want {
				t.Fatalf("limit=%d: plant %d is %q; want %q", limit, i, name, want)
			}
		}
		head := ta.do(t, "HEAD", fmt.Sprintf("/plants?limit=%d", limit), as("x")...)
		get := ta.do(t, "GET", fmt.Sprintf("/plants?limit=%d", limit), as("x")...)
		if nextOf(t, head) != nextOf(t, get) {
			t.Errorf("limit=%d: HEAD next %q, GET next %q", limit, nextOf(t, head), nextOf(t, get))
		}
	}
}

// TestPagingBadAfter: a cursor that does not decode, or two, is a 400 in
// the Error shape naming after; it is checked after the credentials.
func TestPagingBadAfter(t *testing.T) {
	ta := newTestAPI(t, plants.NewMemoryStore(plants.SampleCatalog(), nil))
	good := plants.KeyOf(plants.Plant{Name: "Basil", ID: "basil"}).Cursor()
	for _, target := range []string{
		"/plants?after=",
		"/plants?after",
		"/plants?after=!!",
		"/plants?after=" + good + "=",
		"/plants?after=" + good + "&after=" + good,
		"/plants?limit=2&after=" + good + "&%61fter=" + good,
		"/plants?after=" + strings.Repeat("A", 513),
		"/plants?after=%zz",
		"/plants?after=" + plants.KeyOf(plants.Plant{Name: "n", ID: "i"}).Cursor()[1:],
		"/plants?after=" + good[:3] + "%0D%0A" + good[3:],
	} {
		r := ta.do(t, "GET", target, as("bob")...)
		checkError(t, target, r, 400, "")
		if !strings.Contains(string(r.body), "after") {
			t.Errorf("%s: message %s does not name after", target, r.body)
		}
		if r.header.Get("Link") != "" {
			t.Errorf("%s: a 400 with a Link", target)
		}
	}
	r := ta.do(t, "GET", "/plants?after=!!", hdrRefuse+": 401")
	checkError(t, "bad after without a credential", r, 401, "")
	r = ta.do(t, "GET", "/plants?after=!!", hdrRefuse+": 403")
	checkError(t, "bad after without the scope", r, 403, "")
}
