package runs

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agent-box/agent-box/supervisor"
)

func TestPartialWriteErrorText(t *testing.T) {
	timeout := &supervisor.WriteError{Written: 65536, Total: 200000,
		Err: fmt.Errorf("%w after 10s", supervisor.ErrStdinTimeout)}
	err := partialWriteError("w", timeout)
	assert.Equal(t, `wrote 65536 of 200000 bytes to stdin of run "w" before the write to stdin timed out after 10s; the remaining 134464 bytes were not written`, err.Error())
	assert.ErrorIs(t, err, supervisor.ErrStdinTimeout)
	var we *supervisor.WriteError
	assert.True(t, errors.As(err, &we))
	assert.Equal(t, 65536, we.Written)
	assert.False(t, errors.Is(err, ErrNoStdin))

	broken := &supervisor.WriteError{Written: 0, Total: 6, CloseAsked: true,
		Err: fmt.Errorf("%w (broken pipe)", supervisor.ErrStdinBroken)}
	err = partialWriteError("c", broken)
	assert.Equal(t, `wrote none of the 6 bytes to stdin of run "c": the process closed its stdin or exited (broken pipe); stdin was not closed`, err.Error())
	assert.ErrorIs(t, err, supervisor.ErrStdinBroken)
	assert.ErrorIs(t, err, ErrNoStdin)
}
