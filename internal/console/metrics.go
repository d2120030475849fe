package console

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// metrics serves the plane's metrics (what it counted of every door) and
// the console's own, in the Prometheus formats a scraper asks for.
func (c *Console) metrics(w http.ResponseWriter, r *http.Request, v visit) {
	var resp rpc.MetricsResponse
	if err := c.call(r.Context(), rpc.MethodMetrics, &rpc.MetricsRequest{Operator: v.op}, &resp); err != nil {
		c.fail(w, r, v, err)
		return
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(resp.Text))
	if err != nil {
		c.log.Error().Err(err).Msg("the plane's metrics do not parse")
		http.Error(w, "503 the plane's metrics are unreadable", http.StatusServiceUnavailable)
		return
	}
	plane := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		out := make([]*dto.MetricFamily, 0, len(families))
		for _, f := range families {
			out = append(out, f)
		}
		return out, nil
	})
	promhttp.HandlerFor(prometheus.Gatherers{c.reg, plane}, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).ServeHTTP(w, r)
}
