package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// metric is one row of the results: our figure, the baseline measured in
// the same run (if the row has one), their ratio and the target.
type metric struct {
	Name     string   `json:"name"`
	Unit     string   `json:"unit"`
	Value    float64  `json:"value"`
	Baseline *float64 `json:"baseline,omitempty"`
	// BaselineName says what the baseline is, e.g. "exec /bin/true".
	BaselineName string   `json:"baseline_name,omitempty"`
	Ratio        *float64 `json:"ratio,omitempty"` // Value / Baseline
	Target       string   `json:"target,omitempty"`
	Met          *bool    `json:"met,omitempty"` // nil: no target
	Samples      int      `json:"samples,omitempty"`
	Note         string   `json:"note,omitempty"`
	Error        string   `json:"error,omitempty"` // the measurement failed
}

func (m *metric) setBaseline(name string, v float64) {
	m.BaselineName = name
	m.Baseline = &v
	if v != 0 {
		r := m.Value / v
		m.Ratio = &r
	}
}

func (m *metric) setMet(ok bool) { m.Met = &ok }

type results struct {
	Mode      string  `json:"mode"` // "full" or "quick"
	Binary    string  `json:"binary"`
	Version   string  `json:"version,omitempty"`
	GoVersion string  `json:"go_version"`
	CPUs      int     `json:"cpus"`
	Kernel    string  `json:"kernel,omitempty"`
	Started   string  `json:"started_at"`
	Seconds   float64 `json:"seconds"`
	WorkDir   string  `json:"work_dir"`
	// LoadBefore and LoadAfter are /proc/loadavg at the start and the end:
	// a load above the CPU count means other work shared the machine and
	// every figure is pessimistic.
	LoadBefore string   `json:"loadavg_before"`
	LoadAfter  string   `json:"loadavg_after"`
	Command    string   `json:"command"`
	Metrics    []metric `json:"metrics"`
}

func fmtNum(v float64) string {
	switch a := abs(v); {
	case a == 0:
		return "0"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// printTable writes the results as a Markdown table, readable as is in a
// terminal and pasteable into docs/architecture/performance.md.
func printTable(w io.Writer, res *results) {
	var b strings.Builder
	b.WriteString("| metric | ours | baseline | ratio | target | met |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, m := range res.Metrics {
		ours := fmtNum(m.Value) + " " + m.Unit
		if m.Error != "" {
			ours = "error: " + m.Error
		}
		base, ratio := "—", "—"
		if m.Baseline != nil {
			base = fmtNum(*m.Baseline) + " " + m.Unit + " (" + m.BaselineName + ")"
		}
		if m.Ratio != nil {
			ratio = fmt.Sprintf("%.3g×", *m.Ratio)
		}
		target, met := "—", "—"
		if m.Target != "" {
			target = m.Target
		}
		if m.Met != nil {
			met = map[bool]string{true: "yes", false: "**no**"}[*m.Met]
		}
		name := m.Name
		if m.Samples > 0 {
			name += fmt.Sprintf(" (n=%d)", m.Samples)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", name, ours, base, ratio, target, met)
	}
	io.WriteString(w, b.String())
	var notes []string
	for _, m := range res.Metrics {
		if m.Note != "" {
			notes = append(notes, fmt.Sprintf("- %s: %s", m.Name, m.Note))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "\nNotes:\n%s\n", strings.Join(notes, "\n"))
	}
}

func writeJSON(path string, res *results) error {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// A unique temp name and a rename: a reader (CI) never sees half a file.
	f, err := os.CreateTemp(filepath.Dir(path), ".results-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // fails harmlessly after the rename
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
