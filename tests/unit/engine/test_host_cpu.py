"""The host CPU's facts and vLLM 0.32's CPU attention-kernel rule (engine/vllm/host_cpu.py).
tests/e2e holds the rule to vLLM's own function; these pin the cases that matter."""

import json

from speedbench.engine.vllm.host_cpu import (
    amx_fault_risk,
    attention_kernel,
    cpu_facts,
    normalise_dtype,
    server_attention,
)

AMX_INFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8
processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8
"""
AVX2_INFO = "model name\t: AMD EPYC 7B12\nflags\t\t: fpu sse2 avx2 fma\n"


def test_cpu_facts_name_the_model_and_the_flags_that_matter():
    amx = cpu_facts(AMX_INFO)
    assert amx["model"] == "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"
    assert amx["flags"] == ["avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile"]
    assert amx["amx"] is True
    plain = cpu_facts(AVX2_INFO)
    assert plain["flags"] == ["avx2"] and plain["amx"] is False


def test_kernel_rule_amx_only_for_bfloat16_on_amx_hosts():
    amx, plain = cpu_facts(AMX_INFO), cpu_facts(AVX2_INFO)
    assert attention_kernel("bfloat16", 128, 32, amx) == "amx"
    assert attention_kernel("float16", 128, 32, amx) == "vec"
    assert attention_kernel("bfloat16", 128, 32, plain) == "vec"
    assert attention_kernel("bfloat16", 16, 32, amx) == "vec16"  # block size not a multiple of 32
    assert attention_kernel("bfloat16", 128, 80, amx) == "vec16"  # head size 16k but not 32k
    assert amx_fault_risk("bfloat16", amx) and not amx_fault_risk("float16", amx)
    assert not amx_fault_risk("bfloat16", plain)


def test_dtype_auto_takes_the_model_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"dtype": "bfloat16", "hidden_size": 128,
                                                      "num_attention_heads": 4}))
    assert normalise_dtype(None, "bfloat16") == "bfloat16"
    assert normalise_dtype("half") == "float16" and normalise_dtype("auto", "") == ""
    att = server_attention({}, str(tmp_path), cpu_facts(AMX_INFO))
    assert att["kernel"] == "amx" and att["dtype"] == "bfloat16" and att["head_size"] == 32
    assert att["block_size"] == 128  # vLLM's CPU default
    att = server_attention({"dtype": "float16"}, str(tmp_path), cpu_facts(AMX_INFO))
    assert att["kernel"] == "vec" and att["dtype"] == "float16"
