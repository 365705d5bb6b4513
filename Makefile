# mhar: one binary (./mhar), one static library (build/libmhar.a), tests.
CC      ?= gcc
OPT     ?= -O3 -march=native
CFLAGS  += -Isrc -std=c11 $(OPT) -fopenmp -Wall -Wextra -Werror -D_GNU_SOURCE -MMD -MP
LDLIBS  += -lopenblas -lcjson -lm
LDFLAGS += -fopenmp
BUILD   ?= build

LIB_SRC  := $(shell find src -name '*.c' -not -path 'src/cli/*' | sort)
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TOOL_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(sort $(wildcard tests/tool_*.c)))

.PHONY: all test clean check-clang
all: mhar $(BUILD)/libmhar.a

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libmhar.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

mhar: $(CLI_OBJ) $(BUILD)/libmhar.a
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/tests/%: tests/%.c $(BUILD)/libmhar.a tests/check.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/libmhar.a $(LDFLAGS) $(LDLIBS) -o $@

# The test command of the README: every C, Python and shell test; the last
# line is "N passed, N failed".
test: mhar $(TEST_BIN) $(TOOL_BIN)
	@bash tests/run.sh $(BUILD)

# The code must be -Werror clean with clang too: compile every object with it.
check-clang:
	$(MAKE) --no-print-directory CC=clang BUILD=build-clang build-clang/libmhar.a $(CLI_SRC:%.c=build-clang/%.o)

clean:
	rm -rf $(BUILD) build-clang mhar

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d)
