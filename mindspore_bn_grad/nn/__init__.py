"""BatchNorm cells whose backward is BatchNormBackward."""
