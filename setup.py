"""Install the ganeti package, its daemons and the gnt-* scripts."""

import glob

from setuptools import find_packages, setup

setup(
    name="ganeti",
    version="0.1.0",
    description="A cluster manager for virtual machines in the Ganeti 2.x tradition",
    python_requires=">=3.11",
    packages=find_packages(include=["ganeti", "ganeti.*"]),
    # the web console's pages, scripts and style (doc/webui.md)
    package_data={"ganeti.rapi": ["ui/*.html", "ui/*.js", "ui/*.css"]},
    scripts=sorted(glob.glob("daemons/ganeti-*") + glob.glob("scripts/gnt-*")
                   + ["scripts/ganeti-iallocator"]),
    install_requires=[
        "cryptography>=41",
        "paramiko>=3.4",
        "python-daemon>=3.0",
        "inotify-simple>=1.3",
    ],
    extras_require={
        "test": ["pytest>=8", "pytest-timeout>=2.2", "pytest-xdist>=3.5", "hypothesis>=6.100", "ruff>=0.5",
                 "mypy>=2.4", "types-paramiko>=5.1", "PyYAML>=6.0",
                 "types-PyYAML>=6.0"],
    },
)
