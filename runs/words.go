package runs

// Words are how the front end a Manager serves names the operations that
// its messages point to: an agent reads "process_list shows the runs", a
// person at the CLI "agent-box ps shows the runs".
type Words struct {
	List    string // lists the newest run of each name
	ListAll string // lists older runs too
	Kill    string // signals a run
	Restart string // runs a name's spec again
	Remove  string // deletes finished runs
	// Args name arguments where the front end spells them otherwise than
	// the tools do: "grace_ms" is "--grace" at the CLI. An argument not in
	// it keeps the tool's name.
	Args map[string]string
}

// ToolWords name the MCP tools; a Manager whose Words is zero uses them.
var ToolWords = Words{
	List:    "process_list",
	ListAll: "process_list with all=true",
	Kill:    "process_kill",
	Restart: "process_restart",
	Remove:  "process_remove",
}

// words are m's Words, each one not given the tool's.
func (m *Manager) words() *Words {
	w := m.Words
	for _, f := range []struct {
		got *string
		def string
	}{
		{&w.List, ToolWords.List}, {&w.ListAll, ToolWords.ListAll}, {&w.Kill, ToolWords.Kill},
		{&w.Restart, ToolWords.Restart}, {&w.Remove, ToolWords.Remove},
	} {
		if *f.got == "" {
			*f.got = f.def
		}
	}
	return &w
}

// arg is the tool argument name as m's front end spells it.
func (m *Manager) arg(name string) string {
	if a, ok := m.Words.Args[name]; ok {
		return a
	}
	return name
}
