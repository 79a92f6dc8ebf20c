package runs

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/runrecord"
	"github.com/agent-box/agent-box/supervisor"
)

// BenchmarkList100 times a default process_list of 100 runs, every one
// finished, or ten of them running (real runs: a supervisor and a sleep
// each), as an agent's box has them.
func BenchmarkList100(b *testing.B) {
	for _, running := range []int{0, 10} {
		b.Run(fmt.Sprintf("running=%d", running), func(b *testing.B) {
			b.Setenv("AGENT_BOX_TEST_SUPERVISOR", "1")
			sys, err := NewLiveSystem(supervisor.NewExecutables(os.Args[0]))
			if err != nil {
				b.Fatal(err)
			}
			store, _, err := runrecord.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			m := &Manager{Store: store, Sys: sys, Env: os.Environ(),
				Supervisor: []string{os.Args[0], "-test.run=^TestHelperSupervisor$", "--"}}
			for i := range 100 - running {
				r := record(store, sys.Boot)
				r.Name = fmt.Sprintf("done%03d", i)
				r.LogPath = store.LogPath(r.Name, r.RunID)
				code := i % 3
				r.Exit = &runrecord.Exit{Code: &code, At: time.Now().UTC()}
				r.OutputClosed = true
				if err := store.Create(r); err != nil {
					b.Fatal(err)
				}
			}
			for i := range running {
				name := fmt.Sprintf("live%02d", i)
				if _, err := m.Start(context.Background(), StartRequest{Name: name, Spec: Spec{Argv: []string{"/bin/sleep", "600"}, Cwd: "/"}}); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { m.Kill(name, "", unix.SIGKILL, 0) })
			}
			b.ResetTimer()
			for b.Loop() {
				page, err := m.ListPage(ListQuery{})
				if err != nil || len(page.Runs) != 100 {
					b.Fatalf("%d runs, %v", len(page.Runs), err)
				}
			}
		})
	}
}
