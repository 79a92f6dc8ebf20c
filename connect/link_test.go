//go:build linux

package connect_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// linkArg makes the test binary a link: the network between connect and
// a box. "TEST link PIDFILE MODE BOX_ARGV..." appends its pid to PIDFILE,
// starts the box and carries bytes both ways. Killing it is a dropped
// connection as sshd sees one: the box's stdin ends (it finishes what is
// in flight) and its answers go nowhere. MODE "old" makes the box look
// like an agent-box without safe repeats: the link deletes the capability
// from its answer to initialize; MODE "deaf" makes a link that neither
// passes EOF on to the box nor exits. While PIDFILE.down exists, the link fails
// at once, in ssh's words. While PIDFILE.hang.PID exists, the link whose
// pid is PID passes nothing from the box on, and does not end. Once the
// box's first answer (to initialize) went through, the link makes
// PIDFILE.up.PID. While PIDFILE.v2 exists, the box says it is another
// version.
const linkArg = "link"

func link(args []string) int {
	pidFile, mode, argv := args[0], args[1], args[2:]
	f, err := os.OpenFile(pidFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "link:", err)
		return 1
	}
	fmt.Fprintln(f, os.Getpid())
	f.Close()
	// While PIDFILE.down exists the box is down: the link fails as ssh
	// does when sshd does not answer.
	if _, err := os.Stat(pidFile + ".down"); err == nil {
		fmt.Fprintln(os.Stderr, "ssh: connect to host box port 22: Connection refused")
		return 255
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	// The box is on the far side of the network: not in the transport's
	// process group, which connect kills when the transport dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "link:", err)
		return 1
	}
	// Every message connect sends goes to PIDFILE.sent too, for the tests
	// to see what was re-sent.
	sent, err := os.OpenFile(pidFile+".sent", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "link:", err)
		return 1
	}
	go func() {
		io.Copy(io.MultiWriter(in, sent), os.Stdin)
		if mode == "deaf" {
			select {} // a transport that does not pass EOF on, nor exit
		}
		in.Close()
	}()
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 64<<20)
	hang := fmt.Sprintf("%s.hang.%d", pidFile, os.Getpid())
	up := fmt.Sprintf("%s.up.%d", pidFile, os.Getpid())
	for first := true; sc.Scan(); first = false {
		line := sc.Bytes()
		if _, err := os.Stat(hang); err == nil {
			continue // a link that hangs: nothing gets through, nothing ends
		}
		if _, err := os.Stat(pidFile + ".v2"); err == nil {
			// An agent-box upgraded on the box.
			line = bytes.Replace(line, []byte(`"serverInfo":{"name":"agent-box","version":"`), []byte(`"serverInfo":{"name":"agent-box","version":"v2-`), 1)
		}
		if mode == "old" && bytes.Contains(line, []byte(`"agent-box/safe-repeat"`)) {
			line = []byte(strings.Replace(string(line), `"agent-box/safe-repeat":{}`, `"agent-box/old":{}`, 1))
		}
		os.Stdout.Write(append(line, '\n'))
		if first {
			// The box answered initialize: the dial is through.
			os.WriteFile(up, nil, 0o600)
		}
	}
	cmd.Wait()
	return 0
}
