package dashboards

import (
	"encoding/json"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// datasource is the dashboards' Prometheus: the $datasource variable, so
// they work imported by hand as well as provisioned.
var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// variableQueries find each template variable's values.
var variableQueries = map[string]string{
	"node":    "label_values(partita_client_connections, node)",
	"topic":   "label_values(partita_partition_replicas, topic)",
	"channel": "label_values(partita_channel_depth, channel)",
}

// JSON renders a board as Grafana dashboard JSON.
func (b Board) JSON() ([]byte, error) {
	d, err := b.build()
	if err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

func (b Board) build() (dashboard.Dashboard, error) {
	db := dashboard.NewDashboardBuilder(b.Title).
		Uid(b.UID).
		Description(b.Description).
		Tags([]string{"partita"}).
		Time("now-30m", "now").
		Refresh("30s").
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Prometheus").Type("prometheus"))
	for _, v := range b.Vars {
		db.WithVariable(dashboard.NewQueryVariableBuilder(v).
			Label(v).
			Datasource(datasource).
			Query(dashboard.StringOrMap{String: cog.ToPtr(variableQueries[v])}).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Sort(dashboard.VariableSortAlphabeticalAsc).
			Multi(true).
			IncludeAll(true).
			AllValue(".*"))
	}
	x, y := 0, 0
	for i, p := range b.Panels {
		w, h := 12, 8
		if p.Stat {
			w, h = 6, 4
		}
		if x+w > 24 {
			x, y = 0, y+h
		}
		pos := dashboard.GridPos{X: uint32(x), Y: uint32(y), W: uint32(w), H: uint32(h)}
		if p.Stat {
			db.WithPanel(statPanel(i, p, pos))
		} else {
			db.WithPanel(seriesPanel(i, p, pos))
		}
		x += w
	}
	return db.Build()
}

func targets(p Panel) []cog.Builder[variants.Dataquery] {
	var out []cog.Builder[variants.Dataquery]
	for i, q := range p.Queries {
		out = append(out, prometheus.NewDataqueryBuilder().
			Expr(q.Expr).
			LegendFormat(q.Legend).
			RefId(string(rune('A'+i))).
			Datasource(datasource))
	}
	return out
}

func seriesPanel(id int, p Panel, pos dashboard.GridPos) *timeseries.PanelBuilder {
	pb := timeseries.NewPanelBuilder().
		Id(uint32(id + 1)).
		Title(p.Title).
		Description(p.Description).
		Unit(p.Unit).
		Datasource(datasource).
		GridPos(pos).
		Min(0)
	for _, t := range targets(p) {
		pb.WithTarget(t)
	}
	return pb
}

func statPanel(id int, p Panel, pos dashboard.GridPos) *stat.PanelBuilder {
	pb := stat.NewPanelBuilder().
		Id(uint32(id + 1)).
		Title(p.Title).
		Description(p.Description).
		Unit(p.Unit).
		Datasource(datasource).
		GridPos(pos)
	for _, t := range targets(p) {
		pb.WithTarget(t)
	}
	return pb
}
