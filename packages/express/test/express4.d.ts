/** `express4` is an npm alias of express@4, so the same suite runs on both majors; typed as Express. */
declare module 'express4' {
  import express = require('express')
  export = express
}
