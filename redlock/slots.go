package redlock

import (
	"strconv"
	"strings"
	"sync"
)

// Redis Cluster hash slots, for the marker key of a sharded node: the
// marker of a resource's slot must fall in that slot, so that one script
// can read it beside the lock's keys (docs/design.md, section 6.2).

// numSlots is the number of Redis Cluster hash slots.
const numSlots = 16384

// crc16 is Redis Cluster's key hash, CRC-16/XMODEM (go-redis has it only
// in an internal package).
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// keySlot is key's hash slot: the hash of its tag (what stands between its
// first "{" and the next "}", when not empty), or else of the whole key.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % numSlots)
}

// slotTags holds, for every slot, a short tag that hashes to it: the
// shortest base-36 number that does, found once.
var slotTags = sync.OnceValue(func() []string {
	tags := make([]string, numSlots)
	for n, left := int64(0), numSlots; left > 0; n++ {
		t := strconv.FormatInt(n, 36)
		if s := crc16(t) % numSlots; tags[s] == "" {
			tags[s] = t
			left--
		}
	}
	return tags
})
