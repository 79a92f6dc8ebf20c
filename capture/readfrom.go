package capture

import "io"

// copyBufSize is the read size of ReadFrom, a quarter of the supervisor's
// 1 MiB pipes (F_SETPIPE_SZ): against 1 MiB reads it was as fast combined
// and faster framed, and it keeps the supervisor's peak RSS lower: smaller
// batches stay in cache (docs/architecture/performance.md, "Capture", has
// the figures of each read size).
const copyBufSize = 256 << 10

// ReadFrom drains r into the log until EOF. It never stops early: after a
// write error or at the cap it keeps reading and counts the bytes dropped,
// so the child's pipe is always emptied.
//
// It copies through user space even where splice(2) could move the bytes
// from the pipe to the file in the kernel. Splice holds the pipe's mutex
// for its whole copy into the page cache, so the writer blocks on the
// mutex and the two copies of each byte run one after the other. A read
// holds the mutex only while it copies out, and the file write then
// overlaps the writer's next write: closer to "cmd > file" than splice
// came (performance.md, "Capture"), and one path for every mode.
func (w *writer) ReadFrom(r io.Reader) (int64, error) {
	buf := make([]byte, copyBufSize)
	var total int64
	for {
		n, err := r.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
			total += int64(n)
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}
