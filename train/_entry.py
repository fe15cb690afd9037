"""The ``probe-train`` console script: the stop signals (Ctrl-C, SIGTERM, SIGHUP) are turned into a
flag before anything heavy is imported (click, torch), so a signal while the program starts is read
at a safe point and reported in one line, never as a traceback out of an import."""


def main() -> None:
    from probe.signals import stoppable

    with stoppable():
        from .cli import main as cli_main

        cli_main()
