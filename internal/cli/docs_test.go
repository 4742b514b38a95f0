package cli

import (
	"context"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/testutil"
)

// TestDocsShowRealFencingTokens: the fencing tokens in the examples of
// docs/cli.md and README.md have as many digits as a real one (a
// resource's counter starts at the node's clock in microseconds: 16
// digits), not the 14 they once had.
func TestDocsShowRealFencingTokens(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	ctx := testutil.Context(t)
	nodes, err := redisnode.Dial(ctx, c.URLs()...)
	require.NoError(t, err)
	defer nodes.Close()
	l, err := redlock.New(nodes, redlock.Config{LeaseDuration: 5 * time.Second})
	require.NoError(t, err)
	defer l.Close()
	lease, err := l.TryAcquire(ctx, "digits")
	require.NoError(t, err)
	defer lease.Release(context.WithoutCancel(ctx))
	real := len(lease.Fence().String())
	require.Equal(t, 16, real)

	tokens := regexp.MustCompile(`(?:"fence":|"first_fence":|"last_fence":|fence |fencing tokens |\.\.|REDLOCK_FENCE=)([0-9]{6,})`)
	for _, file := range []string{"../../docs/cli.md", "../../README.md"} {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		found := tokens.FindAllStringSubmatch(string(b), -1)
		for _, m := range found {
			require.Len(t, m[1], real, "%s: fencing token %s", file, m[1])
		}
		if file == "../../docs/cli.md" {
			require.NotEmpty(t, found, "docs/cli.md shows no fencing token")
		}
	}
}
