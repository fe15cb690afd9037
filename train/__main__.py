from ._entry import main

if __name__ == "__main__":   # not when a tool imports every module (the docs build does)
    main()
