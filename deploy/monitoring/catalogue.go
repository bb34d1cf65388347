// Package monitoring checks Strata's operator material offline: the Grafana
// dashboards (deploy/grafana), the Prometheus alert rules and their unit
// tests (deploy/prometheus) and the Prometheus scrape configurations. Every
// PromQL expression is parsed with the Prometheus parser, and every metric
// and label it names must exist in the metric catalogue, docs/metrics.md,
// which strata/internal/metriccatalogue generates from the registries of
// running processes (this module reads the file; it imports no Strata code).
package monitoring

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Family is one row of the catalogue.
type Family struct {
	Name   string
	Type   string
	Labels []string
	// Roles are the role binaries exposing the family ("all" expanded).
	Roles []string
}

// Catalogue is the metric catalogue by family name.
type Catalogue map[string]Family

// catalogueHeader is the table header the generator writes
// (strata/internal/metriccatalogue.Header).
const catalogueHeader = "| metric | type | labels | roles | help |"

// Roles are Strata's four roles.
var Roles = []string{"metad", "partitiond", "coordinatord", "gateway"}

// LoadCatalogue reads docs/metrics.md.
func LoadCatalogue(path string) (Catalogue, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c := Catalogue{}
	sc := bufio.NewScanner(f)
	inTable := false
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		switch {
		case text == catalogueHeader:
			inTable = true
			continue
		case !inTable || strings.HasPrefix(text, "|---"):
			continue
		case !strings.HasPrefix(text, "| "):
			inTable = false
			continue
		}
		cells := splitRow(text)
		if len(cells) != 5 {
			return nil, fmt.Errorf("%s:%d: %d cells, want 5", path, line, len(cells))
		}
		fam := Family{Name: strings.Trim(cells[0], "`"), Type: cells[1]}
		if cells[2] != "—" {
			for _, l := range strings.Split(cells[2], ",") {
				fam.Labels = append(fam.Labels, strings.Trim(strings.TrimSpace(l), "`"))
			}
		}
		if cells[3] == "all" {
			fam.Roles = slices.Clone(Roles)
		} else {
			for _, r := range strings.Split(cells[3], ",") {
				fam.Roles = append(fam.Roles, strings.TrimSpace(r))
			}
		}
		if fam.Name == "" || strings.ContainsAny(fam.Name, " `") {
			return nil, fmt.Errorf("%s:%d: bad metric name %q", path, line, cells[0])
		}
		c[fam.Name] = fam
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(c) == 0 {
		return nil, fmt.Errorf("%s: no catalogue table (header %q)", path, catalogueHeader)
	}
	return c, nil
}

// splitRow splits a markdown table row into trimmed cells; \| is a pipe
// inside a cell.
func splitRow(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimPrefix(row, "|")
	row = strings.TrimSuffix(row, "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(row); i++ {
		switch {
		case row[i] == '\\' && i+1 < len(row) && row[i+1] == '|':
			cur.WriteByte('|')
			i++
		case row[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(row[i])
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// Lookup returns the family a series name belongs to: the family itself,
// or a histogram's _bucket, _sum, _count or a summary's _sum, _count.
func (c Catalogue) Lookup(series string) (Family, bool) {
	if f, ok := c[series]; ok {
		return f, true
	}
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(series, s); ok {
			f, ok := c[base]
			if ok && (f.Type == "histogram" || (f.Type == "summary" && s != "_bucket")) {
				return f, true
			}
		}
	}
	return Family{}, false
}
