"""Tests of bench/speed/host_check.py: the libraries' ISA lines read from their verbose logs, a
framework's rates measured for real, and the report's hosts side by side."""
import math

from bench.speed import host_check

# The lines as oneDNN 3.x (TensorFlow 2.21), oneDNN 2.x and oneMKL 2024 print them.
ONEDNN_3 = ("onednn_verbose,v1,info,oneDNN v3.7.3 (commit N/A)\n"
            "onednn_verbose,v1,info,cpu,runtime:threadpool,nthr:2\n"
            "onednn_verbose,v1,info,cpu,isa:Intel AVX-512 with Intel DL Boost\n"
            "onednn_verbose,v1,primitive,exec,cpu,gemm_api,,undef,src_f32,,,2x2:2x2,0.1\n")
ONEDNN_2 = ("onednn_verbose,info,oneDNN v2.7.3 (commit N/A)\n"
            "onednn_verbose,info,cpu,isa:Intel AVX2\n")
MKL = ("MKL_VERBOSE oneMKL 2024.0 Update 2 Product build 20240605 for Intel(R) 64 architecture "
       "Intel(R) Advanced Vector Extensions 2 (Intel(R) AVX2) enabled processors, Lnx 2.60GHz "
       "lp64 gnu_thread\n"
       "MKL_VERBOSE SGEMM(N,N,256,256,256,...) 1.1ms CNR:OFF Dyn:1 FastMM:1 TID:0  NThr:2\n"
       "torch_cpu_capability: AVX2\n")


def test_the_isa_lines_are_read_from_both_libraries_logs():
    found = host_check.parsed_isa(ONEDNN_3, MKL)
    assert found == {
        "tensorflow_onednn": "Intel AVX-512 with Intel DL Boost",
        "torch_mkl": "2024.0 Update 2 Product build 20240605 for Intel(R) 64 architecture Intel(R) "
                     "Advanced Vector Extensions 2 (Intel(R) AVX2) enabled processors",
        "torch_cpu_capability": "AVX2"}
    assert host_check.parsed_isa(ONEDNN_2, "")["tensorflow_onednn"] == "Intel AVX2"
    assert set(host_check.parsed_isa("", "").values()) == {"not reported"}


def test_tensorflow_rates_are_measured():
    rates = host_check.child_rates("tensorflow", repeats=2)
    assert len(rates["matmul_gflops"]) == len(host_check.PRODUCTS)
    for value in (*rates["matmul_gflops"].values(), rates["add_gbs"]):
        assert math.isfinite(value) and value > 0
    assert rates["intra_op_threads"].startswith("default (")


def _entry(gflops: float, label: str) -> dict:
    rates = {"matmul_gflops": {"2048x384x1536": gflops}, "add_gbs": 20.0,
             "intra_op_threads": "default (2)", "inter_op_threads": "default (2)"}
    return {"machine": {"cpu": label, "cores": 2, "isa": ["avx2"]},
            "lscpu": {"Thread(s) per core": "2", "extra_flags": []},
            "isa": {"tensorflow_onednn": "Intel AVX2", "torch_mkl": "AVX2",
                    "torch_cpu_capability": "AVX2"},
            "environment": {"OMP_NUM_THREADS": "2"},
            "rates": {"tensorflow": rates, "torch": {**rates, "matmul_gflops": {
                "2048x384x1536": 2 * gflops}}},
            "steal_fraction": 0.125, "load_average": [[0.5, 0, 0], [1.5, 0, 0]],
            "date": "2026-12-06 08:00", "rounds": 4, "repeats": 20}


def test_the_report_puts_the_hosts_side_by_side():
    text = host_check.report({"host A": _entry(100.0, "EPYC A"), "host B": _entry(60.0, "EPYC B")})
    lines = text.splitlines()
    assert "| | host A | host B |" in lines
    assert "| Thread(s) per core | 2 | 2 |" in lines
    assert "| matmul 2048x384x1536, GFLOP/s TF / torch | 100 / 200 | 60 / 120 |" in lines
    assert "| CPU time stolen by the hypervisor | 12.5% | 12.5% |" in lines
    assert "| environment | OMP_NUM_THREADS=2 | OMP_NUM_THREADS=2 |" in lines
    assert "| load average, start / end | 0.5 / 1.5 | 0.5 / 1.5 |" in lines
