package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseServerCounts(t *testing.T) {
	stats := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=10,usec=200,usec_per_call=20.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_eval:calls=1,usec=30,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_get:calls=40,usec=20,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=7,usec=700,usec_per_call=100.00,rejected_calls=0,failed_calls=0\r\n"
	cpu := "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:0.750000\r\n"
	s, ok := parseServerCounts(stats, cpu)
	require.True(t, ok)
	require.Equal(t, serverCounts{calls: 51, scripts: 11, scriptUsec: 230, cpuUsec: 2_000_000}, s)

	_, ok = parseServerCounts("", cpu) // no commandstats (miniredis)
	require.False(t, ok)

	after := serverCounts{calls: 51 + 28, scripts: 11 + 4, scriptUsec: 230 + 100, cpuUsec: 2_000_000 + 300}
	require.Equal(t, &serverCost{CommandsPerAcq: 14, ScriptsPerAcq: 2, ScriptUsecPerAcq: 50, CPUUsecPerAcq: 150}, perAcquisition(s, after, 2))
	require.Nil(t, perAcquisition(s, after, 0))
}
