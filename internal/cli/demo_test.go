package cli

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestDemo plays the demo in this process (under the race detector when
// the tests use it), checks the summary and that nothing of it outlives the
// command. It is not parallel, so that goleak sees only its goroutines.
func TestDemo(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	code, stdout, stderr := runInProcess(t, nil, "demo")
	require.Equal(t, exitOK, code, "stderr: %s", stderr)
	require.Empty(t, stderr)
	m := regexp.MustCompile(`(?m)^summary: (\d+) acquisitions, (\d+) fenced writes? accepted, (\d+) stale writes? rejected; fencing tokens \d+\.\.\d+ strictly increasing; balance (\d+) = accepted writes`).FindStringSubmatch(stdout)
	require.NotNil(t, m, stdout)
	acquired, _ := strconv.Atoi(m[1])
	accepted, _ := strconv.Atoi(m[2])
	rejected, _ := strconv.Atoi(m[3])
	require.GreaterOrEqual(t, rejected, 1)
	require.Equal(t, acquired, accepted+rejected)
	require.Equal(t, m[2], m[4])
	for _, want := range []string{"n5 is killed", "REJECTED, stale", "lease lost"} {
		require.Contains(t, stdout, want)
	}
}

// TestE2EDemoJSON runs the binary's demo with --json.
func TestE2EDemoJSON(t *testing.T) {
	t.Parallel()
	r := cli(t, nil, "demo", "--json")
	requireCode(t, r, exitOK, "")
	res := decode(t, r)
	require.GreaterOrEqual(t, res["stale_rejected"].(float64), 1.0)
	require.Equal(t, res["writes_accepted"], res["balance"])
	require.Greater(t, res["last_fence"].(float64), res["first_fence"].(float64))
	require.Less(t, res["duration_ms"].(float64), 10000.0)
}
