# mhar: one binary (./mhar), one static library (build/libmhar.a), tests.
CC      ?= gcc
OPT     ?= -O3 -march=native
# -fno-trapping-math: mhar never reads the floating-point exception flags, and
# without it gcc will not turn a float conditional (the clamps of vexp, a
# running max) into a blend on targets without AVX-512's masks, so on AVX2
# every loop with an exp in it stayed scalar (SwiGLU, cross-entropy, the
# softmaxes of attention and routing). Values are unchanged.
CFLAGS  += -Isrc -std=c11 $(OPT) -fopenmp -fno-trapping-math -Wall -Wextra -Werror -D_GNU_SOURCE -MMD -MP
LDLIBS  += -lopenblas -lcjson -lm
LDFLAGS += -fopenmp
BUILD   ?= build
# The binary; the sanitizer and valgrind builds keep theirs in their build dir.
BIN     ?= mhar

LIB_SRC  := $(shell find src -name '*.c' -not -path 'src/cli/*' | sort)
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TOOL_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(sort $(wildcard tests/tool_*.c)))

.PHONY: all test clean FORCE check-clang asan-test valgrind fuzz fuzz-build
all: $(BIN) $(BUILD)/libmhar.a

$(BUILD)/%.o: %.c $(BUILD)/gen/flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# The compiler and its flags, rewritten only when they change, so that a
# changed flag rebuilds every object (make alone tracks only the sources).
# Taken here, once: a target's own additions below would otherwise leak into
# it through whichever object asked for it first.
FLAGS_STAMP := $(CC) $(CFLAGS) $(LDFLAGS)
$(BUILD)/gen/flags: FORCE
	@mkdir -p $(dir $@)
	@echo '$(FLAGS_STAMP)' >$@.tmp; if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

# Open MPI (libopenmpi-dev) for data-parallel training: src/dist/comm.c is
# the one file that includes mpi.h; its headers are system headers.
MPI_INC  := $(patsubst -I%,-isystem %,$(filter -I%,$(shell mpicc --showme:compile 2>/dev/null)))
MPI_LIBS := $(shell mpicc --showme:link 2>/dev/null)
LDLIBS   += $(MPI_LIBS)
%/src/dist/comm.o: CFLAGS += $(MPI_INC)
ifeq ($(MPI_LIBS),)
ifneq ($(MAKECMDGOALS),clean)
$(error Open MPI's mpicc is missing: run ./setup.sh (Debian packages libopenmpi-dev openmpi-bin))
endif
endif

# The routing kernels are written for fused multiply-adds (see their
# headers); C11 mode forbids contracting a·b + c unless asked.
%/kernels/cpu/route_forward.o %/kernels/cpu/route_backward.o %/kernels/cpu/route_source.o %/kernels/cpu/tile_gemm.o: CFLAGS += -ffp-contract=fast
# The forward's ρ (1/sqrt) for a tile vectorises only when sqrtf need not set
# errno (its argument is > 0); tools/route_ab.sh uses the same flags.
%/kernels/cpu/route_forward.o %/kernels/cpu/route_source.o: CFLAGS += -fno-math-errno
# AdamW's sqrtf vectorises only when it need not set errno (its argument is ≥ 0).
%/kernels/cpu/elementwise.o: CFLAGS += -fno-math-errno

# The commit the binary is built from, for run provenance (mhar sweep):
# regenerated on every make, rewritten only when it changes.
$(BUILD)/gen/commit.h: FORCE
	@mkdir -p $(dir $@)
	@c=$$(git rev-parse HEAD 2>/dev/null || echo unknown); \
	 d=$$(git status --porcelain --untracked-files=no 2>/dev/null | head -c 1); \
	 printf '#define MHAR_COMMIT "%s"\n#define MHAR_DIRTY %d\n' "$$c" $$([ -n "$$d" ] && echo 1 || echo 0) >$@.tmp; \
	 if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
$(BUILD)/src/cli/cmd_sweep.o: $(BUILD)/gen/commit.h
$(BUILD)/src/cli/cmd_sweep.o: CFLAGS += -I$(BUILD)/gen
FORCE:

# The Hugging Face remote code (src/hf/*.py) that model_save writes into run
# directories, embedded as C arrays by tools/embed.c. The generator is built
# with $(CC) alone: no sanitizer or fuzzer flags, it only runs here.
HF_FILES := $(sort $(wildcard src/hf/*.py))
LIB_OBJ  += $(BUILD)/gen/hf_files.o
$(BUILD)/gen/embed: tools/embed.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O1 -Wall -Wextra -Werror $< -o $@
$(BUILD)/gen/hf_files.c: $(BUILD)/gen/embed $(HF_FILES)
	$(BUILD)/gen/embed $@ $(HF_FILES)
$(BUILD)/gen/hf_files.o: $(BUILD)/gen/hf_files.c
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libmhar.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(CLI_OBJ) $(BUILD)/libmhar.a
	$(CC) $(OPT) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/tests/%: tests/%.c $(BUILD)/libmhar.a tests/check.h tests/testfiles.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/libmhar.a $(LDFLAGS) $(LDLIBS) -o $@

# The test command of the README: every C, Python and shell test; the last
# line is "N passed, N failed".
test: $(BIN) $(TEST_BIN) $(TOOL_BIN)
	@MHAR_BIN=$(abspath $(BIN)) bash tests/run.sh $(BUILD)

# The code must be -Werror clean with clang too: compile every object with it.
check-clang:
	$(MAKE) --no-print-directory CC=clang BUILD=build-clang build-clang/libmhar.a $(CLI_SRC:%.c=build-clang/%.o)

# The whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer,
# built with clang in its own build directory with its own binary (the tests
# run $MHAR_BIN). Reports go to files (log_path; gcc's UBSan ignores it, so
# clang), so one from a process whose exit status a test does not look at
# still fails the target; the directory is world-writable for the test that
# runs mhar as an unprivileged user. Leak detection stays on, unsuppressed.
# (-Wno-pass-failed, here and in FUZZ_OPT: clang at -O1 cannot honour every
# "omp simd"; a remark, not a defect.)
ASAN_BUILD := build-asan
ASAN_OPT   := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all \
              -Wno-pass-failed
SAN_LOGS   := $(abspath $(ASAN_BUILD))/sanitizer-logs
asan-test:
	@rm -rf $(SAN_LOGS) && mkdir -p -m 1777 $(SAN_LOGS)
	@ASAN_OPTIONS=log_path=$(SAN_LOGS)/asan:detect_leaks=1:strict_string_checks=1:check_initialization_order=1 \
	 UBSAN_OPTIONS=log_path=$(SAN_LOGS)/ubsan:print_stacktrace=1:halt_on_error=1 \
	 $(MAKE) --no-print-directory test CC=clang BUILD=$(ASAN_BUILD) BIN=$(ASAN_BUILD)/mhar OPT="$(ASAN_OPT)"; rc=$$?; \
	 if [ -n "$$(ls -A $(SAN_LOGS))" ]; then head -n 60 $(SAN_LOGS)/*; echo "FAIL sanitizer reports in $(SAN_LOGS)"; exit 1; fi; \
	 echo "no sanitizer report"; exit $$rc

# A short training run under valgrind memcheck, from a build without
# -march=native (valgrind decodes no AVX-512) and with OpenBLAS on its AVX2
# kernels for the same reason.
VG_BUILD := build-valgrind
valgrind:
	@$(MAKE) --no-print-directory BUILD=$(VG_BUILD) BIN=$(VG_BUILD)/mhar OPT="-O1 -g" $(VG_BUILD)/mhar
	@bash tests/valgrind_train.sh $(VG_BUILD)/mhar

# Fuzzing with libFuzzer (clang): fuzz/fuzz_NAME.c for every parser of outside
# input, each run FUZZ_SECONDS from its committed seeds fuzz/corpus/NAME/
# (FUZZ_JOBS at a time); new inputs and crash files stay in build-fuzz/.
# The normal build replays every seed as a test (build/tests/test_fuzz_NAME).
FUZZ_BUILD   := build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_JOBS    ?= $(shell nproc)
FUZZ_OPT     := -O1 -g -fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer -fno-sanitize-recover=all \
                -Wno-pass-failed
FUZZ_SRC     := $(sort $(wildcard fuzz/fuzz_*.c))
FUZZ_BIN     := $(FUZZ_SRC:fuzz/%.c=$(FUZZ_BUILD)/%)
FUZZ_REPLAY  := $(FUZZ_SRC:fuzz/fuzz_%.c=$(BUILD)/tests/test_fuzz_%)
fuzz-build:
	@$(MAKE) --no-print-directory CC=clang BUILD=$(FUZZ_BUILD) OPT="$(FUZZ_OPT)" $(FUZZ_BIN)
fuzz: fuzz-build
	@bash fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_JOBS)
$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz.h $(BUILD)/libmhar.a $(BUILD)/src/cli/args.o
	$(CC) $(CFLAGS) -fsanitize=fuzzer $< $(BUILD)/src/cli/args.o $(BUILD)/libmhar.a $(LDFLAGS) $(LDLIBS) -o $@
# The same target with a main() that runs every file of its corpus once.
$(BUILD)/tests/test_fuzz_%: fuzz/fuzz_%.c fuzz/fuzz.h fuzz/replay.c $(BUILD)/libmhar.a $(BUILD)/src/cli/args.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DFUZZ_CORPUS='"fuzz/corpus/$*"' $< fuzz/replay.c $(BUILD)/src/cli/args.o $(BUILD)/libmhar.a $(LDFLAGS) $(LDLIBS) -o $@
test: $(FUZZ_REPLAY)

clean:
	rm -rf $(BUILD) build-clang $(ASAN_BUILD) $(VG_BUILD) $(FUZZ_BUILD) mhar

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d)
