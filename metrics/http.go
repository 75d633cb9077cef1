package metrics

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HTTPNames lists the series of an HTTP server (bucketlog serve), without
// the bucketlog_ prefix. They have no shard label: one server, its routes.
var HTTPNames = []string{"http_requests_total", "http_request_seconds"}

// UnmatchedRoute and OtherMethod label a request no route took (404, 405):
// its path and method are the client's and would not bound the label set.
const (
	UnmatchedRoute = "unmatched"
	OtherMethod    = "other"
)

// statusClasses are the values of the code label.
var statusClasses = []string{"1xx", "2xx", "3xx", "4xx", "5xx"}

// HTTP is a server's request series: every (route, method, status class)
// created up front, one per route pattern of the server's mux.
type HTTP struct {
	requests map[[3]string]prometheus.Counter
	seconds  map[[3]string]prometheus.Observer
}

// NewHTTP registers the request series of a server whose mux has the given
// patterns ("METHOD /path", the net/http ServeMux syntax) on reg (nil: a
// private set nobody scrapes).
func NewHTTP(reg prometheus.Registerer, patterns []string) (*HTTP, error) {
	labels := []string{"route", "method", "code"}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "bucketlog", Name: "http_requests_total",
		Help: "HTTP requests by route pattern, method and status class."}, labels)
	seconds := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "bucketlog", Name: "http_request_seconds",
		Help:    "HTTP request latency, headers in to handler return, by route pattern, method and status class.",
		Buckets: prometheus.ExponentialBuckets(100e-6, 2, 18)}, labels)
	if reg != nil {
		for _, c := range []prometheus.Collector{requests, seconds} {
			if err := reg.Register(c); err != nil {
				var are prometheus.AlreadyRegisteredError
				if errors.As(err, &are) {
					return nil, fmt.Errorf("%w: %v", ErrRegistered, err)
				}
				return nil, err
			}
		}
	}
	h := &HTTP{requests: map[[3]string]prometheus.Counter{}, seconds: map[[3]string]prometheus.Observer{}}
	routes := [][2]string{{UnmatchedRoute, OtherMethod}}
	for _, p := range patterns {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			return nil, fmt.Errorf("metrics: route pattern %q has no method", p)
		}
		routes = append(routes, [2]string{path, method})
	}
	for _, r := range routes {
		for _, c := range statusClasses {
			k := [3]string{r[0], r[1], c}
			h.requests[k] = requests.WithLabelValues(k[:]...)
			h.seconds[k] = seconds.WithLabelValues(k[:]...)
		}
	}
	return h, nil
}

// Observe counts and times one request: pattern is the mux pattern that
// took it ("" when none did), status its answer's status.
func (h *HTTP) Observe(pattern string, status int, d time.Duration) {
	k := [3]string{UnmatchedRoute, OtherMethod, statusClass(status)}
	if method, path, ok := strings.Cut(pattern, " "); ok {
		k[0], k[1] = path, method
	}
	c, ok := h.requests[k]
	if !ok { // a pattern the server did not declare: counted as unmatched
		k[0], k[1] = UnmatchedRoute, OtherMethod
		c = h.requests[k]
	}
	c.Inc()
	h.seconds[k].Observe(d.Seconds())
}

func statusClass(status int) string {
	if status < 100 || status > 599 {
		return "5xx"
	}
	return statusClasses[status/100-1]
}
