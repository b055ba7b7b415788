package parse

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/gputriage/gputriage/probe"
)

// The probe's --query-gpu and --query-compute-apps fields (package probe), in its order: the
// column order of a CSV without header. A GPU row has at least the base fields; an app row
// may carry process_name last, as the version 1 probe asked.
var (
	gpuFields    = strings.Split(probe.GPUFields, ",")
	minGPUFields = strings.Count(probe.GPUBaseFields, ",") + 1
	appsFields   = append(strings.Split(probe.AppsFields, ","), "process_name")
)

// ParseGPUCSV reads nvidia-smi --query-gpu CSV output (--format=csv or csv,nounits). With a
// header, columns are found by name in any order, unit suffixes such as " [MiB]" ignored and
// unknown columns skipped; without one the probe's field order is assumed. A value nvidia-smi
// could not read ("[N/A]", "[Not Supported]", "N/A", empty...) becomes nil or "". When the
// index column is missing, a GPU's index is its row number. Text that is not such a CSV (an
// nvidia-smi error) is an error: see ClassifySMIError.
func ParseGPUCSV(r io.Reader) ([]GPU, error) {
	b, err := readInput(r)
	var errs errList
	errs.add(err)
	t := readSMICSV(b, gpuFields, minGPUFields, "name", "query-gpu", &errs)
	var gpus []GPU
	for i, row := range t.rows {
		g := GPU{Index: i}
		if v := t.get(row, "index"); v != "" {
			if n, ok := atoiNonNeg(v); ok {
				g.Index = n
			} else {
				errs.addf("query-gpu line %d: index: %s", row.line, q(v))
			}
		}
		g.UUID = t.get(row, "uuid")
		g.Name = t.get(row, "name")
		g.BusID = t.get(row, "pci.bus_id")
		g.MemoryTotalMiB = t.int64(row, "memory.total", "MiB", &errs)
		g.MemoryUsedMiB = t.int64(row, "memory.used", "MiB", &errs)
		g.MemoryFreeMiB = t.int64(row, "memory.free", "MiB", &errs)
		g.MemoryReservedMiB = t.int64(row, "memory.reserved", "MiB", &errs)
		if u := t.int64(row, "utilization.gpu", "%", &errs); u != nil && *u <= math.MaxInt32 {
			g.UtilizationPct = ptr(int(*u))
		}
		g.ComputeMode = t.get(row, "compute_mode")
		g.DriverVersion = t.get(row, "driver_version")
		g.MIGMode = t.get(row, "mig.mode.current")
		if v := t.get(row, "minor_number"); v != "" {
			if n, ok := atoiNonNeg(v); ok {
				g.MinorNumber = &n
			}
		}
		gpus = append(gpus, g)
	}
	return gpus, errs.err()
}

// ParseAppsCSV reads nvidia-smi --query-compute-apps CSV output, with or without header
// (then in the probe's field order: pid, gpu_uuid, used_memory, process_name). Both
// used_memory and used_gpu_memory name the memory column. A process name holding commas
// splits its row into more fields than the header has: the extra fields are the name's. A
// header alone, or "No running processes found", is no apps and no error.
func ParseAppsCSV(r io.Reader) ([]ComputeApp, error) {
	b, err := readInput(r)
	var errs errList
	errs.add(err)
	if bytes.Contains(b, []byte("No running processes found")) {
		return nil, errs.err()
	}
	t := readSMICSV(b, appsFields, len(appsFields), "process_name", "query-compute-apps", &errs)
	var apps []ComputeApp
	for _, row := range t.rows {
		v := t.get(row, "pid")
		pid, ok := atoiNonNeg(v)
		if !ok {
			errs.addf("query-compute-apps line %d: pid: %s", row.line, q(v))
			continue
		}
		apps = append(apps, ComputeApp{
			PID:         pid,
			GPUUUID:     t.get(row, "gpu_uuid"),
			UsedMiB:     t.int64(row, "used_memory", "MiB", &errs),
			ProcessName: t.get(row, "process_name"),
		})
	}
	return apps, errs.err()
}

// smiTable is an nvidia-smi CSV with its columns found.
type smiTable struct {
	col  map[string]int // field name -> column
	what string
	rows []smiRow
}

type smiRow struct {
	line   int
	fields []string
}

// columnAliases maps header names nvidia-smi has used to the probe's field names.
var columnAliases = map[string]string{
	"used_gpu_memory": "used_memory",
	"gpu_bus_id":      "pci.bus_id",
}

// csvBuffers are the read buffers of readSMICSV's CSV readers (csv.NewReader allocates 4 KiB
// for each otherwise, a few per capture).
var csvBuffers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}

// readSMICSV reads an nvidia-smi CSV. probeOrder is the column order assumed without header;
// elastic is the free-text column that absorbs the extra fields of a row split by commas.
// Without header a row may have from minProbeFields to len(probeOrder) fields: the probe asks
// again with fewer fields when the driver refuses some.
func readSMICSV(b []byte, probeOrder []string, minProbeFields int, elastic, what string, errs *errList) smiTable {
	t := smiTable{what: what, col: map[string]int{}}
	br := csvBuffers.Get().(*bufio.Reader)
	br.Reset(bytes.NewReader(b))
	defer func() { br.Reset(nil); csvBuffers.Put(br) }()
	cr := csv.NewReader(br) // takes br as its buffer: it is as large as csv's own
	cr.TrimLeadingSpace = true
	cr.LazyQuotes = true
	cr.FieldsPerRecord = -1
	known := map[string]bool{}
	for _, f := range probeOrder {
		known[f] = true
	}
	var rawLines []string    // for a rejoined free-text field, kept exactly
	var ncols, minFields int // a row has from minFields to ncols fields
	for first := true; ; {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				line = pe.StartLine
			}
			errs.addf("%s line %d: %v", what, line, err)
			if rec == nil {
				continue
			}
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if first {
			isHeader, ok := t.firstRow(rec, probeOrder, known)
			if !ok {
				// nvidia-smi's complaint about one GPU can precede the table.
				errs.addf("%s line %d: not a %s CSV header: %s", what, line, what, q(strings.Join(rec, ",")))
				continue
			}
			first = false
			if isHeader {
				ncols, minFields = len(rec), len(rec)
				continue
			}
			ncols, minFields = len(probeOrder), minProbeFields
		}
		e, hasElastic := t.col[elastic]
		switch {
		case len(rec) > ncols && hasElastic && e < ncols:
			k := len(rec) - ncols
			joined := strings.Join(rec[e:e+k+1], ",")
			if rawLines == nil {
				rawLines = strings.Split(string(b), "\n")
			}
			if s, ok := rawFields(cr, rawLines, e, e+k, len(rec)); ok {
				joined = s
			}
			rec = append(append(rec[:e:e], joined), rec[e+k+1:]...)
		case len(rec) > ncols || len(rec) < minFields:
			errs.addf("%s line %d: %d fields, want %d: %s", what, line, len(rec), ncols, q(strings.Join(rec, ",")))
			if len(rec) < minFields {
				continue // an nvidia-smi message among the rows, or a cut row
			}
		}
		t.rows = append(t.rows, smiRow{line: line, fields: rec})
	}
	return t
}

// firstRow reads a table's first row into t.col: a header naming the columns (isHeader), or a
// row that starts with a number, read in probeOrder; not ok (t.col left empty) when it is
// neither, as a message before the table is.
func (t *smiTable) firstRow(rec, probeOrder []string, known map[string]bool) (isHeader, ok bool) {
	if _, numeric := atoiNonNeg(strings.TrimSpace(rec[0])); numeric {
		for i, name := range probeOrder {
			t.col[name] = i
		}
		return false, true
	}
	for i, name := range rec {
		name = columnName(name)
		if _, dup := t.col[name]; !dup {
			t.col[name] = i
		}
		isHeader = isHeader || known[name]
	}
	if !isHeader {
		clear(t.col)
	}
	return isHeader, isHeader
}

// rawFields returns the text of fields first..last of the record cr just read (of n fields),
// as it stands in the input, when the record is one line without quotes: a process name
// holding ", " keeps the space that TrimLeadingSpace would drop.
func rawFields(cr *csv.Reader, rawLines []string, first, last, n int) (string, bool) {
	line, col := cr.FieldPos(first)
	if l, _ := cr.FieldPos(n - 1); l != line || line < 1 || line > len(rawLines) {
		return "", false
	}
	l := strings.TrimSuffix(rawLines[line-1], "\r")
	end := len(l)
	if last+1 < n {
		_, next := cr.FieldPos(last + 1)
		end = next - 1
	}
	if col < 1 || col-1 > end || end > len(l) {
		return "", false
	}
	s := l[col-1 : end]
	if last+1 < n {
		s = strings.TrimSuffix(strings.TrimRight(s, " \t"), ",")
	}
	if strings.ContainsRune(s, '"') {
		return "", false
	}
	return strings.TrimRight(s, " \t"), true
}

// columnName normalizes a header field: "memory.used [MiB]" -> "memory.used".
func columnName(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if i := strings.Index(s, " ["); i >= 0 && strings.HasSuffix(s, "]") {
		s = s[:i]
	}
	if a, ok := columnAliases[s]; ok {
		return a
	}
	return s
}

// get returns the named field of a row, "" when unknown or absent.
func (t smiTable) get(row smiRow, name string) string {
	i, ok := t.col[name]
	if !ok || i >= len(row.fields) {
		return ""
	}
	return smiValue(row.fields[i])
}

// int64 returns the named field as a number in unit ("MiB", "%"), nil when unknown.
func (t smiTable) int64(row smiRow, name, unit string, errs *errList) *int64 {
	v := t.get(row, name)
	if v == "" {
		return nil
	}
	n, ok := smiNumber(v, unit)
	if !ok {
		errs.addf("%s line %d: %s: %s", t.what, row.line, name, q(v))
		return nil
	}
	return &n
}

// smiValue trims a field and returns "" for the values nvidia-smi prints when it does not
// know one: "[N/A]", "[Not Supported]", "[Insufficient Permissions]", "[Unknown Error]",
// "[Requested functionality has been deprecated]", "[GPU requires reset]" and the like, "N/A".
func smiValue(s string) string {
	s = strings.TrimSpace(s)
	if s == "N/A" || strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		return ""
	}
	return s
}

// smiNumber reads "11125", "11125 MiB" or "45 %" in the given unit.
func smiNumber(v, unit string) (int64, bool) {
	num, u, _ := strings.Cut(v, " ")
	if u = strings.TrimSpace(u); u != "" && !strings.EqualFold(u, unit) {
		return 0, false
	}
	num = strings.TrimSuffix(num, unit) // "45%"
	if n, ok := parseInt64NonNeg(num); ok {
		return n, true
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || !(f >= 0 && f < 1<<62) {
		return 0, false
	}
	return int64(f), true
}
