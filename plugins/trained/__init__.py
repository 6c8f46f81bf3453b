"""What trained artifacts share: the prompt sets recipes train on (``prompts``) and the
directories trained weights live in (``weights_dir``), shipped or made by a user, with the
converter of such a directory's weights from the old pickle (``to_safetensors``)."""
