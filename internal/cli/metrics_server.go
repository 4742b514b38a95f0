package cli

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
)

// metricsPath is where --metrics-addr serves the metrics.
const metricsPath = "/metrics"

// metricsShutdownTimeout bounds the wait for scrapes in flight when the
// command ends.
const metricsShutdownTimeout = 2 * time.Second

// addMetricsFlag adds --metrics-addr to fs.
func addMetricsFlag(fs *pflag.FlagSet, addr *string) {
	fs.StringVar(addr, "metrics-addr", "", "serve Prometheus metrics at http://`HOST:PORT`"+metricsPath+" while the command runs (port 0: any free port; the address is printed on stderr)")
}

// checkMetricsAddr rejects a --metrics-addr that is not HOST:PORT with a
// port number in range. HOST may be empty (every interface), an IP address
// or a name.
func checkMetricsAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		why := "want HOST:PORT, such as 127.0.0.1:9464 or :9464"
		if ae := (*net.AddrError)(nil); errors.As(err, &ae) && ae.Err != "missing port in address" {
			why = ae.Err + "; " + why
		}
		return usageErrorf("malformed --metrics-addr %q: %s", addr, why)
	}
	if strings.ContainsAny(host, " \t\r\n/") {
		return usageErrorf("malformed --metrics-addr %q: bad host %q", addr, host)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return usageErrorf("malformed --metrics-addr %q: port %q is not a number from 0 to 65535", addr, port)
	}
	return nil
}

// metricsServer serves a registry's metrics over HTTP.
type metricsServer struct {
	srv    *http.Server
	ln     net.Listener
	served chan struct{} // closed when Serve has returned
}

// listenMetrics listens on addr and serves reg at metricsPath. A failure to
// listen (the port in use, an address not of this host) is a *cliError.
func listenMetrics(addr string, reg *prometheus.Registry) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, listenError(addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(metricsPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	ms := &metricsServer{
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      10 * time.Second,
			IdleTimeout:       30 * time.Second,
		},
		ln:     ln,
		served: make(chan struct{}),
	}
	go func() {
		defer close(ms.served)
		_ = ms.srv.Serve(ln) // returns http.ErrServerClosed on stop
	}()
	return ms, nil
}

// listenError describes a failure to listen on addr.
func listenError(addr string, err error) *cliError {
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return &cliError{code: exitFailure, kind: kindFailure, err: err,
			msg: "--metrics-addr " + addr + ": address already in use (another process listens on that port)"}
	case errors.As(err, &dnsErr):
		return usageErrorf("--metrics-addr %s: unknown host %s", addr, dnsErr.Name)
	}
	return &cliError{code: exitFailure, kind: kindFailure, err: err,
		msg: "--metrics-addr " + addr + ": cannot listen: " + reason(err)}
}

// URL is where the metrics are served.
func (ms *metricsServer) URL() string { return "http://" + ms.ln.Addr().String() + metricsPath }

// stop shuts the server down, waiting a little for scrapes in flight, and
// returns once it no longer serves.
func (ms *metricsServer) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), metricsShutdownTimeout)
	defer cancel()
	if err := ms.srv.Shutdown(ctx); err != nil {
		_ = ms.srv.Close()
	}
	<-ms.served
}

// startMetrics serves Prometheus metrics at addr for a command whose
// Lockers have nodes nodes, and sets a.observer to feed them. It prints the
// address on stderr. stop shuts the server down; call it when the command
// ends.
func (a *App) startMetrics(addr string, nodes int) (stop func(), err error) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg, nodes)
	if err != nil {
		return nil, &cliError{code: exitFailure, kind: kindFailure, msg: "metrics: " + err.Error(), err: err}
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ms, err := listenMetrics(addr, reg)
	if err != nil {
		return nil, err
	}
	a.observer = observers(a.observer, m)
	a.warnf("serving metrics on %s", ms.URL())
	return ms.stop, nil
}
