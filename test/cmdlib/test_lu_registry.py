"""Each LU names the opcode it implements as its type argument (LogicalUnit[OpFoo]).

(That every opcode has an LU is test/opcodes/test_opcode_paths.py.)
"""

from __future__ import annotations

import typing

import pytest

from ganeti import opcodes
from ganeti.cmdlib import LU_REGISTRY
from ganeti.cmdlib.base import LogicalUnit


def _declared_opcode(lu_class: type) -> object:
    """The ``OpT`` of ``class LUFoo(Base[OpFoo])``, following the MRO."""
    for cls in lu_class.__mro__:
        for base in getattr(cls, "__orig_bases__", ()):
            origin = typing.get_origin(base)
            if isinstance(origin, type) and issubclass(origin, LogicalUnit):
                (arg,) = typing.get_args(base)
                if isinstance(arg, type):
                    return arg
    return None


@pytest.mark.parametrize("op_id", sorted(LU_REGISTRY))
def test_lu_declares_the_opcode_it_implements(op_id: str) -> None:
    assert _declared_opcode(LU_REGISTRY[op_id]) is opcodes.OP_REGISTRY[op_id]
