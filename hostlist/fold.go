package hostlist

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Fold writes names in compact form, like dshbak -c: "gpu[03,07-09],login1". Names that
// differ only in their last number are folded; zero padding is kept ("gpu[01-16]").
// Groups appear in the order of their first name; duplicates are dropped.
func Fold(names []string) string {
	type group struct {
		prefix, suffix string
		width          int // 0: unpadded numbers
		nums           map[int]bool
		plain          string // a name with no number
	}
	var groups []*group
	index := map[string]*group{}
	for _, n := range names {
		prefix, digits, suffix, ok := lastNumber(n)
		if !ok {
			if index["\x00"+n] == nil {
				g := &group{plain: n}
				index["\x00"+n] = g
				groups = append(groups, g)
			}
			continue
		}
		width := 0
		if len(digits) > 1 && digits[0] == '0' {
			width = len(digits)
		}
		v, _ := strconv.Atoi(digits)
		key := fmt.Sprintf("%s\x00%s\x00%d", prefix, suffix, width)
		if width == 0 {
			// An unpadded number can still belong to a padded group (gpu10 with gpu01..gpu09).
			if g := index[fmt.Sprintf("%s\x00%s\x00%d", prefix, suffix, len(digits))]; g != nil {
				g.nums[v] = true
				continue
			}
		}
		g := index[key]
		if g == nil {
			g = &group{prefix: prefix, suffix: suffix, width: width, nums: map[int]bool{}}
			index[key] = g
			groups = append(groups, g)
		}
		g.nums[v] = true
	}
	parts := make([]string, 0, len(groups))
	for _, g := range groups {
		if g.nums == nil {
			parts = append(parts, g.plain)
			continue
		}
		nums := make([]int, 0, len(g.nums))
		for v := range g.nums {
			nums = append(nums, v)
		}
		sort.Ints(nums)
		if len(nums) == 1 {
			parts = append(parts, g.prefix+fmt.Sprintf("%0*d", g.width, nums[0])+g.suffix)
			continue
		}
		var r []string
		for i := 0; i < len(nums); {
			j := i
			for j+1 < len(nums) && nums[j+1] == nums[j]+1 {
				j++
			}
			if j == i {
				r = append(r, fmt.Sprintf("%0*d", g.width, nums[i]))
			} else {
				r = append(r, fmt.Sprintf("%0*d-%0*d", g.width, nums[i], g.width, nums[j]))
			}
			i = j + 1
		}
		parts = append(parts, g.prefix+"["+strings.Join(r, ",")+"]"+g.suffix)
	}
	return strings.Join(parts, ",")
}

// lastNumber splits a name around its last run of digits.
func lastNumber(s string) (prefix, digits, suffix string, ok bool) {
	end := -1
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] >= '0' && s[i] <= '9' {
			end = i + 1
			break
		}
	}
	if end < 0 {
		return "", "", "", false
	}
	start := end - 1
	for start > 0 && s[start-1] >= '0' && s[start-1] <= '9' {
		start--
	}
	if end-start > 9 {
		return "", "", "", false
	}
	return s[:start], s[start:end], s[end:], true
}
