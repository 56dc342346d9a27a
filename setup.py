"""The optional C extension (perfkit.trace.loader.cdecoder, issue 52); everything else is in pyproject.toml.

``pip install .`` compiles it where a C compiler and the Python headers are present; where they are
not, the build of the extension fails quietly (``optional=True``) and perfkit decodes traces with its
pure-Python path (``perfkit --version`` says which).
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("perfkit.trace.loader.cdecoder", ["perfkit/trace/loader/cdecoder.c"], optional=True,
                             extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-fno-strict-aliasing"])])
