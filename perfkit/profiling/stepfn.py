"""The function whose calls are ``perfkit profile --step``'s steps: found, wrapped, and, when it cannot be
a step, the reason in one line.

A function of a module (``mymod:plan``) is wrapped before the script runs (:func:`wrap_function`). One the
script defines (``plan``, ``Planner.step``) does not exist until the script's ``def`` runs, so
:class:`ScriptStep` watches the script's calls until the name is bound, then wraps it. A property is
recorded through its getter. A builtin (``print``), a generator function (its body runs on iteration,
not in the call) or a name the script never defines is refused with what the script does define.
"""
from __future__ import annotations

import builtins
import importlib
import inspect
import re
import sys

from ..errors import ParameterError

QUALNAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_MAX_NAMES = 12  # names listed in a "never defined" message


def wrap_function(spec: str, on_step):
    """Replace the function named ``module:qualname`` by a wrapper that calls ``on_step`` after each
    call returns; returns the function that puts the original back. Raises ParameterError (see
    :func:`resolve_function`) and for a generator function."""
    owner, attr, original = resolve_function(spec)
    why = not_a_step(spec, inspect.getattr_static(owner, attr, original))
    if why:
        raise ParameterError(why)
    return _wrap_attr(owner, attr, on_step)


def _wrapper(original, on_step):
    def step_wrapper(*args, **kwargs):
        result = original(*args, **kwargs)
        on_step()
        return result

    step_wrapper.__wrapped__ = original
    return step_wrapper


def _wrap_attr(owner, attr: str, on_step):
    """Replace ``owner.attr`` (a module's function, a class's method, classmethod, staticmethod or property)
    by a wrapper that calls ``on_step`` after each call; returns the undo."""
    if not isinstance(owner, type):  # a module's function
        original = getattr(owner, attr)
        setattr(owner, attr, _wrapper(original, on_step))
        return lambda: setattr(owner, attr, original)
    own = attr in owner.__dict__
    raw = inspect.getattr_static(owner, attr)
    if isinstance(raw, property):
        new = property(_wrapper(raw.fget, on_step), raw.fset, raw.fdel, raw.__doc__)
    elif isinstance(raw, (classmethod, staticmethod)):
        new = type(raw)(_wrapper(raw.__func__, on_step))  # a classmethod's wrapper gets cls first
    else:
        new = _wrapper(raw, on_step)
    setattr(owner, attr, new)
    return lambda: setattr(owner, attr, raw) if own else delattr(owner, attr)


def not_a_step(name: str, raw) -> str:
    """Why ``raw`` (a function as stored: property, classmethod...) cannot be a step, "" when it can."""
    func = raw.fget if isinstance(raw, property) else getattr(raw, "__func__", raw)
    if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
        return (f"--step {name} is a generator function: a call only creates the generator and its body runs "
                "on iteration; name the function that consumes it once per step")
    if inspect.iscoroutinefunction(func):
        return (f"--step {name} is a coroutine function: a call only creates the coroutine; name the function "
                "that awaits it once per step")
    if isinstance(raw, property) and raw.fget is None:
        return f"--step {name} is a property without a getter: name a method"
    if not isinstance(raw, property) and not callable(func):
        return f"--step {name} is not a function ({type(raw).__name__}): name a function or method"
    return ""


class ScriptStep:
    """Watch the calls the script at ``script`` makes or receives (a profile hook, two comparisons per call
    between other files meanwhile) until ``qualname`` is bound in its globals, then wrap it and call ``on_found``.
    After :meth:`undo`, :meth:`problem` says why no call could be counted ("" when it was found)."""

    def __init__(self, qualname: str, script: str, on_step, on_found):
        self.qualname, self.script, self.on_step, self.on_found = qualname, script, on_step, on_found
        self.top, *self.path = qualname.split(".")
        self.globals = None  # the script's globals, once it runs
        self.refused = ""
        self.hook_removed = False
        self._undo = None
        self._previous = sys.getprofile()
        sys.setprofile(self._hook)

    def _hook(self, frame, event, arg):
        if event not in ("call", "c_call") or self._undo is not None:
            return
        if frame.f_code.co_filename != self.script:  # a call into another file, made from the script's code?
            frame = frame.f_back
            if frame is None or frame.f_code.co_filename != self.script:
                return
        if self.globals is None and frame.f_globals.get("__name__") == "__main__":
            self.globals = frame.f_globals
        raw = _lookup(frame.f_globals, self.top, self.path)
        if raw is None:
            return
        self.refused = not_a_step(self.qualname, raw)
        if not self.refused:
            self._undo = _wrap_in(frame.f_globals, self.top, self.path, self.on_step)
            self.on_found()
        self._unhook()

    def _unhook(self) -> None:
        if sys.getprofile() == self._hook:
            sys.setprofile(self._previous)
        self._unhook = lambda: None  # the hook is gone: a later setprofile is the script's own

    def undo(self) -> None:
        if self._undo is None and not self.refused and sys.getprofile() != self._hook:
            self.hook_removed = True
        self._unhook()
        if self._undo is not None:
            self._undo()

    def problem(self) -> str:
        """Why the step was never found or refused; "" when it was wrapped."""
        if self._undo is not None:
            return ""
        if self.refused:
            return self.refused
        if not self.path and self.top in vars(builtins) and (self.globals is None or self.top not in self.globals):
            return (f"--step {self.qualname} is a builtin, not a Python function: perfkit counts calls of a "
                    "Python function; name the script's function that calls it once per step")
        if self.hook_removed:
            return (f"--step {self.qualname}: the script removed perfkit's hook (sys.setprofile) before it defined "
                    f"{self.qualname}, so its calls could not be counted; set the profile function after that def, "
                    "or move the function to a module and pass --step module:function")
        return f"--step {self.qualname}: the script never defined it; {_what_exists(self.globals, self.top, self.path)}"


def _lookup(module_globals: dict, top: str, path: list):
    """The object ``top.path...`` as stored (a property or classmethod itself), or None when not bound yet."""
    if top not in module_globals:
        return None
    owner, raw = None, module_globals[top]
    for part in path:
        owner = raw
        try:
            raw = inspect.getattr_static(owner, part)
        except AttributeError:
            return None
    return raw


def _wrap_in(module_globals: dict, top: str, path: list, on_step):
    """Wrap ``top.path...`` found in a module's globals dict; returns the undo."""
    if path:
        owner = module_globals[top]
        for part in path[:-1]:
            owner = getattr(owner, part)
        return _wrap_attr(owner, path[-1], on_step)
    original = module_globals[top]
    module_globals[top] = _wrapper(original, on_step)
    return lambda: module_globals.__setitem__(top, original)


def _what_exists(module_globals, top: str, path: list) -> str:
    """'it defines: Planner, plan' (the script's own functions and classes) or 'Planner has: act, value'."""
    if module_globals is None:
        return "the script ran none of its code"
    if top in module_globals and path:
        owner, parents = module_globals[top], [top]
        for part in path[:-1]:
            if not hasattr(owner, part):
                break
            owner, parents = getattr(owner, part), parents + [part]
        names = [n for n, v in vars(owner).items() if not (n.startswith("__") and n != "__call__")
                 and (callable(v) or isinstance(v, (property, classmethod, staticmethod)))] if isinstance(owner, type) else []
        return f"{'.'.join(parents)} has: {_names(names)}"
    names = [n for n, v in module_globals.items() if (inspect.isfunction(v) or inspect.isclass(v))
             and getattr(v, "__module__", None) == "__main__"]
    return f"it defines: {_names(names)}"


def _names(names: list) -> str:
    if not names:
        return "no function or class"
    more = f" and {len(names) - _MAX_NAMES} more" if len(names) > _MAX_NAMES else ""
    return ", ".join(names[:_MAX_NAMES]) + more


def resolve_function(spec: str):
    """(object holding it, attribute name, function) of ``"module:qualname"``.

    Raises ParameterError when the text has no ``module:`` part, the module does not import or the
    name is not a callable in it."""
    module_name, qualname = split(spec)
    try:
        owner = importlib.import_module(module_name)
    except ImportError as exc:
        raise ParameterError(f"--step {spec!r}: module {module_name!r} does not import ({exc}); run from the "
                             "folder that holds it") from exc
    *path, attr = qualname.split(".")
    for part in path:
        owner = getattr(owner, part, None)
        if owner is None:
            break
    raw = inspect.getattr_static(owner, attr, None) if owner is not None else None
    if raw is None or not (callable(getattr(owner, attr, None)) or isinstance(raw, property)):
        raise ParameterError(f"--step {spec!r}: {module_name} has no function {qualname!r}")
    return owner, attr, getattr(owner, attr) if not isinstance(raw, property) else raw


def split(spec: str) -> tuple[str, str]:
    module_name, sep, qualname = str(spec).partition(":")
    if not sep or not module_name or not qualname:
        raise ParameterError(f"--step {spec!r}: name the function as module:function or "
                             "module:Class.method (e.g. mytrain:train_step)")
    return module_name, qualname
