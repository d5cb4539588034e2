"""Builds the C engine with make while the wheel is built, so `pip install .`
gives a working oslens with its engine inside the package."""
import os
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution


class BuildEngine(build_py):
    def run(self):
        super().run()
        here = os.path.dirname(os.path.abspath(__file__))
        out = os.path.join(os.path.abspath(self.build_lib), "oslens", "_bin")
        os.makedirs(out, exist_ok=True)
        subprocess.check_call(["make", "-C", os.path.join(here, "engine"), f"BINDIR={out}", "install"])


class BinaryDistribution(Distribution):
    # The wheel carries a native executable: never tag it as pure Python.
    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildEngine}, distclass=BinaryDistribution)
