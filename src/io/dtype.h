// The floating-point formats of a checkpoint, and conversion to and from
// mhar's fp32 master weights.
//
// Reading is exact: every bf16 and f16 value is an fp32 value. bf16 is the
// high half of an fp32 word; f16 (1 sign, 5 exponent, 10 mantissa bits) maps
// normals, subnormals (down to 2^-24), zeros, infinities and NaNs (sign and
// payload kept) to the fp32 of the same value.
// Writing rounds to nearest, ties to even. A NaN stays a NaN (made quiet, sign
// kept); infinities stay infinities; a finite value too large for the format
// rounds to infinity: the export refuses it before writing (dtype_overflow).
// Byte order in files is little-endian, read and written byte by byte, so no
// alignment is needed.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef enum { DTYPE_F32, DTYPE_BF16, DTYPE_F16, DTYPE_COUNT } Dtype;

// Bit masks of Dtype, for the set of formats a reader accepts.
#define DTYPE_BIT(t) (1u << (t))
#define DTYPES_FLOAT (DTYPE_BIT(DTYPE_F32) | DTYPE_BIT(DTYPE_BF16) | DTYPE_BIT(DTYPE_F16))

const char *dtype_st_name(Dtype t);    // safetensors: "F32", "BF16", "F16"
const char *dtype_torch_name(Dtype t); // config.json: "float32", "bfloat16", "float16"
const char *dtype_flag_name(Dtype t);  // mhar flags: "f32", "bf16", "f16"
size_t dtype_size(Dtype t);            // bytes per value
// The format named by a safetensors dtype / an mhar flag; MHAR_ERR if none
// (no message: the caller knows the context).
int dtype_from_st_name(const char *name, Dtype *out);
int dtype_from_flag(const char *name, Dtype *out);
// Bytes per value of any safetensors dtype (I64, F8_E4M3, ...), 0 if unknown:
// to check the byte span of a tensor mhar will not read.
size_t st_dtype_size(const char *name);

float bf16_to_f32(uint16_t h);
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float x);
uint16_t f32_to_f16(float x);

// n little-endian values of type t at src -> dst.
void dtype_to_f32(Dtype t, const unsigned char *src, float *dst, size_t n);
// n values -> little-endian t at dst (rounded as above).
void f32_to_dtype(Dtype t, const float *src, unsigned char *dst, size_t n);
// Index of the first finite value of src[0..n) that t cannot hold (it would
// round to infinity), or n if every one fits.
size_t dtype_overflow(Dtype t, const float *src, size_t n);
