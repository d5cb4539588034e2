#!/bin/sh
# worker_layout.sh IMAGE: the padding, as assembly, that lays out the static
# worker image so that fork's child touches as few pages as a plain static
# program's does. After fork the child runs glibc's fork path (__libc_fork
# to __run_postfork_handlers) and writes glibc's fork bookkeeping
# (__fork_generation, the _dl_stack_* lists), all of it in pages it must
# fault in: text by fault-around, 64 KiB windows of the file; data by
# copy-on-write, a page each. Where that code straddles a window or those
# variables a page, every fork pays a fault more than it need, some 4 % of
# a static fork here. Which it is depends on where the engine's own code and
# data end, so the image is linked once, measured with nm, and linked again
# with text and .bss padding ahead of libc's. Pads are whole pages of text
# (the data segment's offsets within a page stay as measured) and under a
# page of .bss. Symbols this libc does not have are left alone.
set -eu
image=$1
page=4096
window=65536 # the kernel's default fault_around_bytes
nm -S -t d "$image" | awk -v page=$page -v window=$window '
	{ addr[$NF] = $1 + 0; if (NF == 4) size[$NF] = $2 + 0 }
	function pad(first, last, unit,    a, b) {
		if (!(first in addr) || !(last in addr))
			return 0
		a = addr[first]; b = addr[last] + size[last] - 1
		if (int(a / unit) == int(b / unit) || b - a >= unit)
			return 0
		return unit - a % unit
	}
	END {
		text = pad("__libc_fork", "__run_postfork_handlers", window)
		text = int((text + page - 1) / page) * page
		bss = pad("__fork_generation", "_dl_stack_used", page)
		# no .space where nothing is padded: as warns of a zero count
		if (text) printf "\t.text\n\t.space %d, 0xcc\n", text
		if (bss) printf "\t.bss\n\t.space %d\n", bss
		printf "\t.section .note.GNU-stack,\"\",@progbits\n"
	}'
