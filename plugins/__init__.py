"""Built-in plugins. Each module is declared as an entry point in group ``specmix``, like any third party's."""
